"""multilabel_margin_loss_forward while AOTAutograd traces tpu tensors.

PyTorch registers a kernel for this op on the Autograd key with `py_impl`
(torch/_decomp/decompositions.py); it runs whatever the decomposition table
says, so leaving the op out of the table does not keep it whole, and the
kernel counts the label slots after a sample's first -1 as targets (torch
2.13 gives 5.34 where the CPU kernel gives 1.28 for a target row
[3, 0, -1, 1, 2]). This registers a kernel that stops at the first -1 for
AutogradPrivateUse1 only, the key tpu tensors dispatch to; only the Python
dispatcher (used while tracing) consults it, so eager mode and other devices
are untouched.
"""
import torch
from torch._C import DispatchKey

from .record import Patch, mark, marked

NAME = "multilabel_margin_tracing"
_KEY = DispatchKey.AutogradPrivateUse1


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


mark(multilabel_margin_loss_forward, NAME)


def _op():
    return torch.ops.aten.multilabel_margin_loss_forward.default


def install():
    if not installed():
        _op().py_impl(_KEY)(multilabel_margin_loss_forward)


def installed():
    return marked(_op().py_kernels.get(_KEY), NAME)


PATCH = Patch(
    name=NAME,
    targets=("torch.ops.aten.multilabel_margin_loss_forward.default[AutogradPrivateUse1]",),
    reason=("PyTorch's py_impl kernel for this op on the Autograd key (its decomposition) counts the label "
            "slots after a sample's first -1 as targets (5.34 where the CPU kernel gives 1.28 for the target row "
            "[3, 0, -1, 1, 2]); tpu tensors traced by AOTAutograd get one that stops at the first -1."),
    issue="https://github.com/pytorch/pytorch/issues/185464",
    versions={"torch": ("2.13.0",)},
    when="the first torch.compile(backend='tpu')",
    scope="the AutogradPrivateUse1 key only, consulted only by the Python dispatcher while tracing",
    install=install,
    installed=installed,
)
