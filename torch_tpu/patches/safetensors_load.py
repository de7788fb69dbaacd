"""safetensors.torch.load_file(path, device="tpu") (and load_model(..., device="tpu")).

safetensors' Rust reader accepts a fixed list of device names (cpu, cuda, mps,
npu, xpu, xla, ...) and refuses "tpu" before reading anything. So when
safetensors.torch is imported, its load_file is wrapped: for a tpu device the
file is read on the CPU (memory-mapped, no extra copy) and each tensor is
uploaded to the tpu; every other device goes to the original function
unchanged. save_file needs nothing: it already moves tensors to the CPU.
Not covered: safetensors.safe_open(path, "pt", device="tpu"), which is the
Rust class itself (open it on "cpu" and call .to("tpu")).

safetensors is optional, and importing it costs time, so nothing imports it
here: an import hook on sys.meta_path wraps load_file when the program first
imports safetensors.torch.
"""
import functools

import torch

from . import import_hook
from .record import Patch, mark, marked

NAME = "safetensors_load"
_TARGET = "safetensors.torch"


def _is_tpu(device):
    if isinstance(device, torch.device):
        return device.type == "tpu"
    return isinstance(device, str) and torch.device(device).type == "tpu"


def _wrap(module):
    original = module.load_file
    if marked(original, NAME):
        return

    @functools.wraps(original)
    def load_file(filename, device="cpu", **kwargs):
        if not _is_tpu(device):
            return original(filename, device=device, **kwargs)
        return {k: v.to(device) for k, v in original(filename, device="cpu", **kwargs).items()}

    module.load_file = mark(load_file, NAME)


def install():
    import_hook.run_after_import(_TARGET, _wrap, NAME)


def installed():
    """load_file is wrapped once safetensors.torch is imported; until then the hook waits for it."""
    return import_hook.wrapped_after_import(_TARGET, "load_file", NAME)


PATCH = Patch(
    name=NAME,
    targets=("safetensors.torch.load_file", "sys.meta_path"),
    reason=("safetensors' Rust reader accepts a fixed list of device names and refuses 'tpu' before reading; "
            "load_file(path, device='tpu') (and load_model, which calls it) reads on the CPU, memory-mapped, "
            "and uploads each tensor. An import hook wraps load_file when safetensors.torch is first imported, "
            "so that importing torch_tpu does not import safetensors."),
    issue="https://github.com/safetensors/safetensors/pull/786",
    versions={"safetensors": ("0.8.0",), "torch": ("2.13.0",)},
    when="import torch_tpu (the hook); first import of safetensors.torch (the wrapper)",
    scope="only device='tpu'; every other device goes to safetensors' own load_file unchanged",
    install=install,
    installed=installed,
)
