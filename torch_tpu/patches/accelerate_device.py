"""Hugging Face accelerate's default device when tpu is PyTorch's accelerator.

accelerate 1.15 picks its device from a list of backends it knows (mps, cuda,
xpu, npu, ...), which has no tpu, and never asks ``torch.accelerator``; so
``Accelerator()`` chose the CPU while transformers' Trainer, which does ask
``torch.accelerator``, sends its batches to ``tpu:0``: training failed with
"Expected all tensors to be on the same device". accelerate documents one
way to name any device, the environment variable ACCELERATE_TORCH_DEVICE
(read when its first ``PartialState`` is made). ``import torch_tpu`` sets it
to ``tpu`` when tpu is PyTorch's current accelerator and the variable is
unset, and patches nothing.

Consequence: accelerate lets that variable win over ``cpu=True``, so code
that imports torch_tpu and asks accelerate or the Trainer for the CPU
(``Accelerator(cpu=True)``, ``TrainingArguments(use_cpu=True)``) must also set
``ACCELERATE_TORCH_DEVICE=cpu``.
"""
import torch

from .record import EnvironmentDefault, Patch

NAME = "accelerate_device"
VARIABLE = "ACCELERATE_TORCH_DEVICE"


def _tpu_when_current():
    accelerator = torch.accelerator.current_accelerator(check_available=False)
    return "tpu" if accelerator is not None and accelerator.type == "tpu" else None


_DEFAULT = EnvironmentDefault(VARIABLE, _tpu_when_current)
install, installed = _DEFAULT.install, _DEFAULT.installed

PATCH = Patch(
    name=NAME,
    targets=(f"os.environ[{VARIABLE}]",),
    reason="accelerate's default device list has no tpu and never asks torch.accelerator, so Accelerator() and "
           "the HF Trainer placed the model on the CPU while the Trainer sent batches to tpu:0; "
           "ACCELERATE_TORCH_DEVICE is accelerate's documented way to name a device.",
    issue=None,
    versions={"accelerate": ("1.15.0",), "transformers": ("5.23.0",)},
    when="import torch_tpu",
    scope="the process's environment, only when the variable is unset and tpu is PyTorch's accelerator",
    install=install,
    installed=installed,
)
