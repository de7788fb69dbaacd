"""Losses: cross_entropy (log_softmax + nll_loss), nll_loss (weight,
ignore_index, every reduction, 1-D / 2-D / 4-D inputs), mse_loss, l1_loss,
smooth_l1_loss, huber_loss, binary_cross_entropy."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case, same_error

TOLS = dict(rtol=2e-2, atol=2e-2)


def targets(shape, n_classes, seed, ignore=None):
    t = torch.randint(0, n_classes, shape, generator=torch.Generator().manual_seed(seed))
    if ignore is not None and t.numel() > 1:
        t.view(-1)[0] = ignore
    return t


def probs(shape, dtype, i):
    return (torch.rand(shape, generator=torch.Generator().manual_seed(i)) * 0.9 + 0.05).to(dtype)


def ce(reduction="mean", weight=False, ignore_index=-100, ignore=None, smoothing=0.0):
    def fn(x, *w):
        shape = (x.shape[0],) + tuple(x.shape[2:]) if x.dim() > 1 else ()
        t = targets(shape, x.shape[1] if x.dim() > 1 else x.shape[0], 3, ignore).to(x.device)
        wt = (torch.rand(x.shape[1] if x.dim() > 1 else x.shape[0], generator=torch.Generator().manual_seed(5))
              .to(x.dtype).to(x.device)) if weight else None
        return F.cross_entropy(x, t, wt, ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    return fn


def nll(reduction="mean", weight=False, ignore_index=-100, ignore=None):
    def fn(x):
        shape = (x.shape[0],) + tuple(x.shape[2:]) if x.dim() > 1 else ()
        t = targets(shape, x.shape[1] if x.dim() > 1 else x.shape[0], 3, ignore).to(x.device)
        wt = (torch.rand(x.shape[1] if x.dim() > 1 else x.shape[0], generator=torch.Generator().manual_seed(5))
              .to(x.dtype).to(x.device)) if weight else None
        return F.nll_loss(x.log_softmax(1 if x.dim() > 1 else 0), t, wt, ignore_index=ignore_index,
                          reduction=reduction)
    return fn


SHAPES = [[(4, 5)], [(5,)], [(2, 5, 3, 3)], [(0, 5)]]

CASES = [
    OpCase("cross_entropy", ce(), SHAPES, FLOATS, grad=True, **TOLS),
    OpCase("cross_entropy_sum", ce("sum"), SHAPES[:3], FLOATS, grad=True, **TOLS),
    OpCase("cross_entropy_none", ce("none"), SHAPES, FLOATS, grad=True, **TOLS),
    OpCase("cross_entropy_weight", ce(weight=True), SHAPES[:3], FLOATS, grad=True, **TOLS),
    OpCase("cross_entropy_ignore", ce(ignore_index=2, ignore=2), SHAPES[:3], FLOATS, grad=True, **TOLS),
    OpCase("cross_entropy_ignore_neg", ce("sum", weight=True, ignore=-100), [[(4, 5)], [(2, 5, 3, 3)]], FLOATS,
           grad=True, **TOLS),
    OpCase("cross_entropy_weight_ignore_none", ce("none", weight=True, ignore_index=1, ignore=1),
           [[(4, 5)], [(2, 5, 3)]], FLOATS, grad=True, **TOLS),
    OpCase("cross_entropy_smoothing", ce(smoothing=0.1), [[(4, 5)]], FLOATS, grad=True, **TOLS),
    OpCase("nll_loss", nll(), SHAPES[:3], FLOATS, grad=True, **TOLS),
    OpCase("nll_loss_weight_sum", nll("sum", weight=True), SHAPES[:3], FLOATS, grad=True, **TOLS),
    OpCase("nll_loss_all_ignored", lambda x: F.nll_loss(x, torch.full((4,), 1, device=x.device), ignore_index=1),
           [[(4, 5)]], FLOAT),
    OpCase("mse_loss", F.mse_loss, [[(3, 4), (3, 4)], [(), ()], [(2, 3, 4), (2, 3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("mse_loss_sum", lambda a, b: F.mse_loss(a, b, reduction="sum"), [[(3, 4), (3, 4)]], FLOATS, grad=True,
           **TOLS),
    OpCase("mse_loss_none", lambda a, b: F.mse_loss(a, b, reduction="none"), [[(3, 4), (3, 4)]], FLOATS,
           grad=True, **TOLS),
    OpCase("l1_loss", F.l1_loss, [[(3, 4), (3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("l1_loss_sum", lambda a, b: F.l1_loss(a, b, reduction="sum"), [[(3, 4), (3, 4)]], FLOATS, grad=True,
           **TOLS),
    OpCase("smooth_l1_loss", F.smooth_l1_loss, [[(3, 4), (3, 4)], [(2, 3, 4), (2, 3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("smooth_l1_loss_beta", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="sum"),
           [[(3, 4), (3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("smooth_l1_loss_beta0", lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, reduction="none"),
           [[(3, 4), (3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("huber_loss", lambda a, b: F.huber_loss(a, b, delta=0.7), [[(3, 4), (3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("bce", F.binary_cross_entropy, [[(3, 4), (3, 4)]], FLOATS, make=probs, grad=True, **TOLS),
    OpCase("bce_weight_sum", lambda a, b, w: F.binary_cross_entropy(a, b, w, reduction="sum"),
           [[(3, 4), (3, 4), (3, 4)]], FLOATS, make=probs, **TOLS),
]


@parametrize(CASES)
def test_loss(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_bad_inputs_raise():
    same_error(F.nll_loss, torch.randn(3, 4), torch.zeros(4, dtype=torch.long))
    same_error(F.nll_loss, torch.randn(3, 4), torch.zeros(3))
    same_error(F.cross_entropy, torch.randn(3, 4, 2), torch.zeros(3, 3, dtype=torch.long))
