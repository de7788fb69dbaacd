"""Eager execution modes.

"fused" (the default) records ops into a pending cluster and runs the
cluster as one program when a value is observed (.cpu(), .item(), printing),
at torch.tpu.synchronize(), at the end of a training step (below), or when
the cluster reaches TORCH_TPU_FUSED_MAX_OPS ops (512). "strict" runs every
ATen op as its own XLA program as soon as it is called. Results are the same
in both modes; fused mode launches far fewer programs and lets XLA fuse them.
Serving workers (vLLM, SGLang) run strict whatever the default.

    torch_tpu.set_eager_mode("strict")     # or TORCH_TPU_EAGER_MODE=strict
    with torch_tpu.eager_mode("strict"): ...

TORCH_TPU_LAUNCH_BLOCKING=1 makes every op synchronous (and turns fusion
off), so that an error is raised by the op that caused it.

The end of a training step ends a cluster, so that a step's forward,
backward and optimizer update are one program, cut at the same place every
step (a cluster cut only by its size would start at a different op each step
and compile anew). With TORCH_TPU_FUSED_STEP_END=optimizer (the default) the
step ends when an optimizer's step() returns; until the first one has, and
always with TORCH_TPU_FUSED_STEP_END=backward, at the end of every backward
pass (both cut by torch_tpu/patches/autograd_flush.py).
"""
import contextlib

from . import _C, settings

MODES = ("strict", "fused")

# Set once an optimizer's step() has ended a cluster: from then on that is
# where clusters end, not at each backward pass.
_optimizer_stepped = False


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
    """Zeros the counters, forgets compiled cluster programs and that an
    optimizer step has ended a cluster (reset_step_end)."""
    reset_step_end()
    _C._reset_fused_stats()


def reset_step_end():
    """Forgets that an optimizer step has ended a cluster: backward passes
    end clusters again until one does."""
    global _optimizer_stepped
    _optimizer_stepped = False


def _steps_end_at_optimizer():
    return settings.get("TORCH_TPU_FUSED_STEP_END") == "optimizer"


def backward_ends_cluster():
    """Whether the end of a backward pass ends the pending fused cluster."""
    return not (_optimizer_stepped and _steps_end_at_optimizer())


def optimizer_step_ended():
    """An optimizer's step() has returned (torch_tpu/patches/autograd_flush.py's
    hook): in fused mode, the pending cluster ends here, and from now on
    backward passes no longer end clusters."""
    global _optimizer_stepped
    if _C._eager_mode() != "fused" or not _steps_end_at_optimizer():
        return
    _optimizer_stepped = True
    _C._fused_flush("optimizer")
