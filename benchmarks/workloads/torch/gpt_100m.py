"""(f) GPT training step with about 100M parameters: gpt2.py's model (pre-LN
blocks, causal attention written out, GELU MLP, tied embeddings, AdamW) at
GPT-2 small's width and depth with a 32k vocabulary (dims.gpt_100m)."""
from .. import dims
from .gpt2 import build_sized


def build(device):
    return build_sized(dims.gpt_100m, "gpt_100m", device)
