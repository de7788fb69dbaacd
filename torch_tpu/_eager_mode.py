"""Eager execution modes.

"strict" (the default) runs every ATen op as its own XLA program as soon as
it is called. "fused" records ops into a pending cluster and runs the
cluster as one program when a value is observed (.cpu(), .item(), printing),
at torch.tpu.synchronize(), at the end of a backward pass, or when the
cluster reaches TORCH_TPU_FUSED_MAX_OPS ops (512). Results are the same in
both modes; fused mode launches far fewer programs and lets XLA fuse them.

    torch_tpu.set_eager_mode("fused")      # or TORCH_TPU_EAGER_MODE=fused
    with torch_tpu.eager_mode("fused"): ...

TORCH_TPU_LAUNCH_BLOCKING=1 makes every op synchronous (and turns fusion
off), so that an error is raised by the op that caused it.

The end of a backward pass also ends a cluster (torch_tpu/patches/autograd_flush.py).
"""
import contextlib

from . import _C

MODES = ("strict", "fused")


def set_eager_mode(mode):
    """Selects "strict" (op by op) or "fused" eager execution. Pending fused
    work runs first, so the switch never changes a result."""
    if mode not in MODES:
        raise ValueError(f"torch_tpu.set_eager_mode: expected one of {MODES}, got {mode!r}")
    _C._set_eager_mode(mode)


def get_eager_mode():
    return _C._eager_mode()


@contextlib.contextmanager
def eager_mode(mode):
    """Runs the block in `mode`, then restores the previous mode."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def fused_stats():
    """Counters of fused eager mode: ops recorded, clusters run, cluster
    programs compiled and reused, and why clusters were cut
    (torch_tpu.stats("fused"))."""
    from ._stats import stats
    return stats("fused")


def reset_fused_stats():
    """Zeros the counters and forgets compiled cluster programs."""
    _C._reset_fused_stats()
