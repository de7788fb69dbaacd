"""The end of a backward pass ends a fused eager cluster.

In fused eager mode (torch_tpu._eager_mode) ops are recorded into a pending
cluster that runs when a value is observed. A backward pass is a natural
boundary: Tensor.backward() calls torch.autograd.backward, so wrapping it and
torch.autograd.grad flushes the pending cluster once either returns (or
raises). In strict mode, the default, the wrappers only check the mode.
"""
import functools

import torch

from .record import Patch, mark, marked

NAME = "autograd_flush"
_FUNCTIONS = ("backward", "grad")


def _flush_after(fn, _C):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            if _C._eager_mode() == "fused":
                _C._fused_flush("backward")

    return mark(wrapper, NAME)


def install():
    from .. import _C

    for name in _FUNCTIONS:
        fn = getattr(torch.autograd, name)
        if not marked(fn, NAME):
            setattr(torch.autograd, name, _flush_after(fn, _C))


def installed():
    return all(marked(getattr(torch.autograd, name), NAME) for name in _FUNCTIONS)


PATCH = Patch(
    name=NAME,
    targets=("torch.autograd.backward", "torch.autograd.grad"),
    reason=("Fused eager mode records tpu ops into a pending cluster; the end of a backward pass ends it, so "
            "that the gradients' program runs as one cluster (flush reason 'backward'). PyTorch has no "
            "end-of-backward hook for a PrivateUse1 backend's pending work."),
    issue=None,
    versions={"torch": ("2.13.0",)},
    when="import torch_tpu",
    scope="flushes only tpu's pending fused cluster, and only in fused mode; the result is unchanged",
    install=install,
    installed=installed,
)
