"""The end of an optimizer step, or of a backward pass, ends a fused eager cluster.

In fused eager mode (torch_tpu._eager_mode) ops are recorded into a pending
cluster that runs when a value is observed. A training step's end is where a
cluster should end: the end of an optimizer's step() once one has run
(_eager_mode's optimizer hook), before that the end of a backward pass.
Tensor.backward() calls torch.autograd.backward, so wrapping it and
torch.autograd.grad flushes the pending cluster once either returns (or
raises) while _eager_mode.backward_ends_cluster() says so. In strict mode,
the default, the wrappers only check the mode.
"""
import functools

import torch
import torch.optim.optimizer as optimizer_module  # torch.optim deletes its submodules' names

from .record import Patch, mark, marked

NAME = "autograd_flush"
_FUNCTIONS = ("backward", "grad")


def _flush_after(fn, _C, _eager_mode):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            if _C._eager_mode() == "fused" and _eager_mode.backward_ends_cluster():
                _C._fused_flush("backward")

    return mark(wrapper, NAME)


def _end_of_step(_eager_mode):
    def hook(optimizer, args, kwargs):
        """torch.optim's global step post-hook. Under Dynamo it does nothing: a
        compiled step() cannot flush, and a graph break here would fail
        fullgraph=True."""
        if not torch.compiler.is_compiling():
            _eager_mode.optimizer_step_ended()

    return mark(hook, NAME)


_hook = None


def install():
    global _hook
    from .. import _C, _eager_mode

    for name in _FUNCTIONS:
        fn = getattr(torch.autograd, name)
        if not marked(fn, NAME):
            setattr(torch.autograd, name, _flush_after(fn, _C, _eager_mode))
    if _hook is None:
        _hook = optimizer_module.register_optimizer_step_post_hook(_end_of_step(_eager_mode))


def installed():
    hooks = optimizer_module._global_optimizer_post_hooks
    return (all(marked(getattr(torch.autograd, name), NAME) for name in _FUNCTIONS)
            and _hook is not None and _hook.id in hooks)


PATCH = Patch(
    name=NAME,
    targets=("torch.autograd.backward", "torch.autograd.grad",
             "torch.optim.optimizer._global_optimizer_post_hooks[autograd_flush]"),
    reason=("Fused eager mode records tpu ops into a pending cluster, which should end where a training step "
            "does, at the same place every step: at the end of an optimizer's step() (a global step post-hook; "
            "flush reason 'optimizer'), and until one has ended there, at the end of a backward pass (flush "
            "reason 'backward'). PyTorch has no end-of-backward hook for a PrivateUse1 backend's pending work."),
    issue=None,
    versions={"torch": ("2.13.0",)},
    when="import torch_tpu",
    scope="flushes only tpu's pending fused cluster, and only in fused mode; the result is unchanged",
    install=install,
    installed=installed,
)
