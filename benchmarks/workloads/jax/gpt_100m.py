"""(f) GPT training step with about 100M parameters in JAX: see workloads/torch/gpt_100m.py."""
from .. import dims
from .gpt2 import build_sized


def build():
    return build_sized(dims.gpt_100m, "gpt_100m")
