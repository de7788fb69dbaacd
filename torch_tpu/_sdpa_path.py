"""Private: force one of scaled_dot_product_attention's lowerings.

On tpu, SDPA's fused op lowers densely (the whole L x S score matrix in one
program) up to a key length, and blockwise past it (an online softmax over
key blocks, memory linear in L + S); see csrc/lowering/ops/attention_blockwise.cpp.
Benchmarks and tests compare the two on the same shapes with

    with torch_tpu._sdpa_path.forced("blockwise", block_keys=4):
        ...

Programs are cached by their call, not by this switch, so entering and
leaving drop the in-memory program cache (torch_tpu.cache_clear()); a
torch.compile'd function keeps the programs it built, so compile it inside.
Not for models: the automatic choice is the supported one.
"""
from torch_tpu import _C
from torch_tpu._kernel_paths import switched

PATHS = ("auto", "dense", "blockwise", "kernel")


def forced(path, block_keys=0):
    """Within the block, SDPA lowers by `path` ("dense", "blockwise",
    "kernel" (the attention kernel, torch_tpu/kernels) or "auto") with key
    blocks of `block_keys` keys (0: the default)."""
    if path not in PATHS:
        raise ValueError(f"sdpa path must be one of {PATHS}, not {path!r}")
    return switched(lambda: _C._set_sdpa_path(path, int(block_keys)), lambda: _C._set_sdpa_path("auto", 0))
