"""Writes the files TorchTitan's llama3 debug config reads from its source tree.

The config reads `./tests/assets/tokenizer` (a Hugging Face tokenizer) and the
`c4_test` dataset from `./tests/assets/c4_test`, both relative to the working
directory; the torchtitan wheel carries neither. This builds them offline:
a byte-level BPE tokenizer (the `tokenizers` library) trained on text taken
from the Python standard library's docstrings, and a JSON-lines dataset of
that text. Nothing is downloaded. Deterministic for one Python version.

    python make_assets.py DIR     # then run torchtitan with cwd=DIR
"""
import json
import inspect
import sys
from pathlib import Path

# Modules whose docstrings make the corpus (plain English, stable per Python version).
_MODULES = ["argparse", "collections", "json", "pathlib", "re", "string", "textwrap",
            "itertools", "functools", "unittest", "logging", "subprocess", "threading",
            "heapq", "bisect", "decimal", "fractions", "statistics", "random", "csv"]
VOCAB_SIZE = 2048  # the llama3 debug model's embedding size; ids stay below it


def corpus() -> list[str]:
    """Paragraphs of English text from stdlib docstrings, in a fixed order."""
    texts = []
    for name in _MODULES:
        module = __import__(name)
        for attr in sorted(dir(module)):
            doc = getattr(getattr(module, attr, None), "__doc__", None)
            if isinstance(doc, str) and len(doc) > 200 and attr[0] != "_":
                texts.append(inspect.cleandoc(doc))
    seen, unique = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            unique.append(t)
    return unique


def write_tokenizer(path: Path, texts: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
        "add_bos_token": False, "add_eos_token": False,
        "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=1))


def write_dataset(path: Path, texts: list[str]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "train.json", "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")


def make_assets(root) -> Path:
    """Writes ROOT/tests/assets/{tokenizer,c4_test}; returns ROOT."""
    root = Path(root)
    texts = corpus()
    write_tokenizer(root / "tests" / "assets" / "tokenizer", texts)
    write_dataset(root / "tests" / "assets" / "c4_test", texts)
    return root


if __name__ == "__main__":
    out = make_assets(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(f"wrote {out}/tests/assets/tokenizer and {out}/tests/assets/c4_test")
