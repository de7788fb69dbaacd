"""Kernels used while AOTAutograd traces tpu tensors, in place of the ones
PyTorch registers on the Autograd key with `py_impl` (those run whatever the
decomposition table says, so leaving an op out of it does not keep it whole).

Each replacement is registered for AutogradPrivateUse1 only, the key tpu
tensors dispatch to, and only the Python dispatcher (used while tracing)
consults it: eager mode and other devices are untouched.

- multilabel_margin_loss_forward: PyTorch's kernel counts the label slots
  after a sample's first -1 as targets (torch 2.13 gives 5.34 where the CPU
  kernel gives 1.28 for a target row [3, 0, -1, 1, 2]); this one stops at it.
"""
import torch
from torch._C import DispatchKey

aten = torch.ops.aten
_installed = False


def multilabel_margin_loss_forward(input, target, reduction):
    """(loss, is_target) as the CPU kernel computes them: for each sample, the
    labels before its first -1 are its targets; the loss sums
    max(0, 1 - (x[target] - x[j])) over targets and non-target classes j,
    divided by the number of classes."""
    x = input.reshape(1, -1) if input.dim() < 2 else input
    y = target.reshape(x.shape)
    classes = x.shape[1]
    in_list = (y == -1).cumsum(-1) == 0                       # [n, slot]: slot holds a target
    label = torch.where(in_list, y, 0)
    cls = torch.arange(classes, device=y.device)
    is_target = ((label.unsqueeze(-1) == cls) & in_list.unsqueeze(-1)).any(1)   # [n, class]
    x_label = x.gather(1, label)                              # [n, slot]
    margin = (1 - x_label.unsqueeze(-1) + x.unsqueeze(1)).clamp_min(0)         # [n, slot, class]
    keep = in_list.unsqueeze(-1) & ~is_target.unsqueeze(1)
    per_sample = torch.where(keep, margin, 0).sum((1, 2)) / classes
    if reduction == 1:
        loss = per_sample.mean()
    elif reduction == 2:
        loss = per_sample.sum()
    else:
        loss = per_sample.reshape(()) if input.dim() < 2 else per_sample
    return loss, is_target.to(input.dtype).reshape(target.shape)


def install():
    """Registers the replacements (once)."""
    global _installed
    if _installed:
        return
    aten.multilabel_margin_loss_forward.default.py_impl(DispatchKey.AutogradPrivateUse1)(
        multilabel_margin_loss_forward)
    _installed = True
