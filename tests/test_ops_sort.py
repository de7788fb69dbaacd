"""Sorting: sort (stable, descending, NaN placement as in PyTorch), argsort,
msort, topk (largest / smallest, with gradients)."""
import pytest
import torch

from optest import ALL, FLOATS, INTS, OpCase, parametrize, run_case, same_error


def ties_nan(shape, dtype, i):
    g = torch.Generator().manual_seed(i)
    t = torch.randint(-2, 3, shape, generator=g).to(torch.float64)
    if dtype.is_floating_point and t.numel() > 4:
        t.view(-1)[torch.randperm(t.numel(), generator=g)[:3]] = float("nan")
        t.view(-1)[0] = float("-inf")
    return t.to(dtype) if dtype != torch.bool else t > 0


def distinct(shape, dtype, i):
    n = 1
    for s in shape:
        n *= s
    t = torch.randperm(max(n, 1), generator=torch.Generator().manual_seed(i))[:n].reshape(shape)
    if dtype == torch.bool:
        return t > n // 2
    return (t.to(torch.float64) * 0.25 - 3).to(dtype) if dtype.is_floating_point else (t - n // 2).to(dtype)


SHAPES = [[(3, 7)], [(2, 3, 5)], [()], [(0, 4)], [(9,)]]

CASES = [
    OpCase("sort", lambda a: a.sort(), SHAPES, ALL, make=ties_nan, grad=True),
    OpCase("sort_stable_desc", lambda a: a.sort(dim=0, stable=True, descending=True), SHAPES, ALL, make=ties_nan,
           grad=True),
    OpCase("sort_stable", lambda a: torch.sort(a, stable=True, dim=1), [[(3, 7)], [(2, 3, 5)]], ALL, make=ties_nan),
    OpCase("sort_out", lambda a: torch.sort(a, -1)[0], [[(3, 7)]], FLOATS + INTS, make=ties_nan),
    OpCase("argsort", lambda a: torch.argsort(a, dim=-1, stable=True), [[(3, 7)], [(9,)]], FLOATS + INTS, make=ties_nan),
    OpCase("argsort_desc", lambda a: a.argsort(0, descending=True), [[(3, 7)]], FLOATS + INTS, make=distinct),
    OpCase("msort", torch.msort, [[(5, 3)]], FLOATS + INTS, make=ties_nan),
    OpCase("topk", lambda a: a.topk(3), [[(3, 7)], [(9,)]], FLOATS + INTS, make=distinct, grad=True),
    OpCase("topk_smallest", lambda a: a.topk(2, dim=0, largest=False), [[(3, 7)], [(4, 2, 3)]], FLOATS + INTS,
           make=distinct, grad=True),
    OpCase("topk_k0", lambda a: a.topk(0), [[(3, 7)]], FLOATS, make=distinct),
    OpCase("topk_0d", lambda a: a.topk(1), [[()]], FLOATS, make=distinct),
    OpCase("topk_nan", lambda a: a.topk(3)[0], [[(3, 8)]], FLOATS, make=ties_nan),
]


@parametrize(CASES)
def test_sort(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_sort_out_variant():
    x = torch.randn(3, 5)
    v, i = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    torch.sort(x.to("tpu"), 1, out=(v, i))
    ev, ei = torch.sort(x, 1)
    torch.testing.assert_close(v.cpu(), ev)
    torch.testing.assert_close(i.cpu(), ei)


def test_bad_k_raises():
    same_error(lambda t: t.topk(8), torch.randn(3, 7))


def test_bad_dim_raises():
    same_error(lambda t: t.sort(2), torch.randn(3, 7))
    same_error(lambda t: t.topk(2, dim=3), torch.randn(3, 7))
