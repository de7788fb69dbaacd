"""nn.DataParallel raises at construction when it would use tpu.

DataParallel splits, copies and joins tensors with torch.nn.parallel.comm,
whose scatter, gather and broadcast are C++ functions that exist only in
CUDA builds of PyTorch (torch._C._scatter, _gather, _broadcast_coalesced);
no device hook replaces them, and even one device goes through scatter. Once
torch_tpu is loaded, DataParallel picks tpu whenever CUDA is absent, moves a
one-device module to tpu and then fails in forward with "torch._C has no
attribute '_scatter'". This makes such a DataParallel raise when it is built,
naming what works instead. A DataParallel that picks CUDA (or nothing) is
untouched.
"""
import functools

import torch

from .record import Patch, mark, marked

NAME = "data_parallel"
MESSAGE = ("torch.nn.DataParallel cannot run on tpu: its scatter, gather and broadcast "
           "(torch._C._scatter, _gather, _broadcast_coalesced) exist only in CUDA builds of PyTorch. "
           "Call the module directly on one tpu device, or use "
           "torch.nn.parallel.DistributedDataParallel with one process per device.")


def _picks_tpu():
    from torch._utils import _get_available_device_type

    return _get_available_device_type() == torch._C._get_privateuse1_backend_name()


def install():
    cls = torch.nn.parallel.DataParallel
    original = cls.__init__
    if marked(original, NAME):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if _picks_tpu():
            raise RuntimeError(MESSAGE)
        original(self, *args, **kwargs)

    cls.__init__ = mark(__init__, NAME)


def installed():
    return marked(torch.nn.parallel.DataParallel.__init__, NAME)


PATCH = Patch(
    name=NAME,
    targets=("torch.nn.parallel.DataParallel.__init__",),
    reason=("DataParallel's scatter, gather and broadcast (torch._C._scatter, _gather, _broadcast_coalesced) "
            "exist only in CUDA builds of PyTorch; a DataParallel that picks tpu would move the module and then "
            "fail in forward with \"torch._C has no attribute '_scatter'\". It raises at construction instead, "
            "naming DistributedDataParallel."),
    issue="https://github.com/pytorch/pytorch/issues/143239",
    versions={"torch": ("2.13.0",)},
    when="import torch_tpu",
    scope="only a DataParallel that would pick tpu (no CUDA); one that picks CUDA or nothing is untouched",
    install=install,
    installed=installed,
)
