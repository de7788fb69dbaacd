"""Private: force a rule's choice between its XLA lowering and its kernel
(torch_tpu/kernels), for tests and benchmarks that compare the two on the
same shapes; off TPU the kernel runs through Pallas' interpret lowering.

    with torch_tpu._kernel_paths.grouped_mm("kernel"):   # or "xla", "auto"
        ...

SDPA's lowerings are forced by torch_tpu._sdpa_path.forced (its "kernel"
path is the attention kernel). Programs are cached by their call, not by
these switches, so entering and leaving drop the in-memory program cache.
Not for models: the automatic choice is the supported one.
"""
import contextlib

import torch_tpu
from torch_tpu import _C

GROUPED_MM_PATHS = ("auto", "xla", "kernel")


@contextlib.contextmanager
def switched(apply, reset):
    """Within the block, `apply()` holds; `reset()` after it. Pending work
    runs first and the program cache is dropped on both sides."""
    torch_tpu.tpu.synchronize()
    apply()
    torch_tpu.cache_clear()
    try:
        yield
    finally:
        torch_tpu.tpu.synchronize()
        reset()
        torch_tpu.cache_clear()


def grouped_mm(path):
    """torch._grouped_mm lowers by `path`: "xla", "kernel" (the grouped-matmul
    kernel wherever the call fits it) or "auto"."""
    if path not in GROUPED_MM_PATHS:
        raise ValueError(f"grouped_mm path must be one of {GROUPED_MM_PATHS}, not {path!r}")
    return switched(lambda: _C._set_grouped_mm_path(path), lambda: _C._set_grouped_mm_path("auto"))
