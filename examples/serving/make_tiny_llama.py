"""Writes a small random Llama (4 layers, hidden 128, float32) and a BPE
tokenizer trained offline into a folder, so that the vLLM server of the
README can be tried without a model hub. It is the model benchmarks/serving.py
serves; its text is random words, as its weights are random.

    .venv/bin/python examples/serving/make_tiny_llama.py /tmp/tiny-llama
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from serving import build_model  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="folder to write (created if missing)")
    p.add_argument("--max-positions", type=int, default=512, help="the model's max_position_embeddings")
    a = p.parse_args()
    os.makedirs(a.path, exist_ok=True)
    build_model(a.path, a.max_positions // 2, 0)
    print(f"wrote a tiny Llama and its tokenizer to {a.path}")


if __name__ == "__main__":
    main()
