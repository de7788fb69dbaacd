"""Keeps tied parameters tied across Module.to("tpu").

PyTorch moves a parameter in place (param.data = moved) only between devices
its shallow-copy check knows (CPU, CUDA, ...); for a PrivateUse1 device each
module gets a new Parameter instead, so weights shared by two modules (a
language model's embedding and output layer) would silently come apart. On
CUDA they stay one Parameter; this restores that: after the outermost _apply,
every group of modules that shared one Parameter shares the moved one.
"""
import threading

import torch

from .record import Patch, mark, marked

NAME = "module_ties"
_state = threading.local()


def _shared_parameters(module):
    owners = {}
    for mod in module.modules():
        for name, p in mod._parameters.items():
            if p is not None:
                owners.setdefault(id(p), []).append((mod, name))
    return [group for group in owners.values() if len(group) > 1]


def install():
    original = torch.nn.Module._apply
    if marked(original, NAME):
        return

    def _apply(self, fn, recurse=True):
        if getattr(_state, "depth", 0) or not recurse:
            return original(self, fn, recurse)
        groups = _shared_parameters(self)
        _state.depth = 1
        try:
            result = original(self, fn, recurse)
        finally:
            _state.depth = 0
        for group in groups:
            first_mod, first_name = group[0]
            moved = first_mod._parameters[first_name]
            for mod, name in group[1:]:
                if mod._parameters[name] is not moved:
                    mod._parameters[name] = moved
        return result

    _apply.__wrapped__ = original
    torch.nn.Module._apply = mark(_apply, NAME)


def installed():
    return marked(torch.nn.Module._apply, NAME)


PATCH = Patch(
    name=NAME,
    targets=("torch.nn.Module._apply",),
    reason=("Module.to('tpu') gives each module a new Parameter, because PyTorch's shallow-copy check "
            "(torch._has_compatible_shallow_copy_type) knows only in-tree devices; parameters shared by two "
            "modules (tied embedding and LM head) would come apart. After the outermost _apply, every group "
            "of modules that shared one Parameter shares the moved one, as on CUDA."),
    issue=None,
    versions={"torch": ("2.13.0",)},
    when="import torch_tpu",
    scope="every Module._apply; it re-ties only parameters that were one Parameter before the call",
    install=install,
    installed=installed,
)
