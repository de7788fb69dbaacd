"""torch_tpu._internal.sync: TorchTPU's ``synchronize(t, wait=True)``.

Callers (vLLM's TPU model loaders, Helion's tests) use it to make a tensor's
value real on the device before going on: the pending work that produces it
is issued, and with ``wait=True`` the host blocks until it is done.
"""
import torch

from .. import _C


def _tensors(tensors):
    if isinstance(tensors, torch.Tensor):
        return [tensors]
    if isinstance(tensors, (list, tuple)):
        out = []
        for t in tensors:
            out.extend(_tensors(t))
        return out
    raise TypeError(f"synchronize: expected a tensor or a list of tensors, got {type(tensors).__name__}")


def synchronize(tensors, wait=True):
    """Issues the pending programs that produce `tensors` (a tensor or a
    list/tuple of them; pending fused eager work is run as its cluster) and,
    with ``wait=True``, blocks until the devices holding them have finished
    every issued program (device errors raise here). CPU tensors are left
    alone. Returns None."""
    devices = sorted({t.device.index or 0 for t in _tensors(tensors) if t.device.type == "tpu"})
    if not devices:
        return
    _C._fused_flush("python")
    if wait:
        for d in devices:
            _C._synchronize(d)


__all__ = ["synchronize"]
