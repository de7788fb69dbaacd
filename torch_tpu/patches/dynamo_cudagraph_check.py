"""Dynamo's optimizer tracing skips Inductor's CUDA graph trees for tpu grads.

Dynamo's optimizer tracing asks, for every parameter's gradient, whether it
is static for CUDA graphs; its helper imports torch._inductor's CUDA graph
trees, and with them most of Inductor (1.3 to 2 s here), before it looks at
the device. The replacement gives the helper's own answer for a tensor not on
CUDA (True) for tpu tensors without that import, and calls the original for
every other tensor. Installed when the "tpu" Dynamo backend is registered or
first used (Dynamo is loaded by then).
"""
from .record import Patch, mark, marked

NAME = "dynamo_cudagraph_check"
_MODULE = "torch._dynamo.variables.optimizer"
_ATTR = "_is_static_for_cudagraphs"


def install():
    from torch._dynamo.variables import optimizer

    original = getattr(optimizer, _ATTR)
    if marked(original, NAME):
        return

    def is_static_for_cudagraphs(x):
        return True if x.device.type == "tpu" else original(x)

    is_static_for_cudagraphs.__wrapped__ = original
    setattr(optimizer, _ATTR, mark(is_static_for_cudagraphs, NAME))


def installed():
    import sys

    module = sys.modules.get(_MODULE)
    return module is not None and marked(getattr(module, _ATTR), NAME)


PATCH = Patch(
    name=NAME,
    targets=(f"{_MODULE}.{_ATTR}",),
    reason=("Dynamo's optimizer tracing asks of every gradient whether it is static for CUDA graphs, and the "
            "helper imports Inductor's CUDA graph trees (most of Inductor, 1.3 to 2 s) before it looks at the "
            "device. For a tpu tensor the replacement answers as the helper does for any tensor not on CUDA "
            "(True) without that import."),
    issue=None,
    versions={"torch": ("2.13.0",)},
    when="torch_tpu.compiler.register() or the first torch.compile(backend='tpu')",
    scope="tpu tensors only; every other tensor goes to the original helper",
    install=install,
    installed=installed,
)
