"""Reductions: sum, nansum, mean, prod, max/min (full, .dim with first-occurrence
indices, NaN), amax/amin, aminmax, argmax/argmin, var/std (+ _mean),
norm / linalg.vector_norm, any/all, count_nonzero, logsumexp, cumsum/cumprod;
over dims, keepdim, 0-d and empty inputs."""
import pytest
import torch

from optest import ALL, FLOAT, FLOATS, INTS, NUMERIC, OpCase, parametrize, run_case, same_error

SHAPES = [[(3, 4)], [(2, 3, 4)], [()], [(0, 3)], [(5,)]]
NONEMPTY = [[(3, 4)], [(2, 3, 4)], [()], [(5,)]]


def ties(shape, dtype, i):
    """Few distinct values (ties), a NaN or two in float tensors."""
    g = torch.Generator().manual_seed(i)
    t = torch.randint(0, 3, shape, generator=g).to(torch.float64)
    if dtype.is_floating_point and t.numel() > 4:
        t.view(-1)[torch.randperm(t.numel(), generator=g)[:2]] = float("nan")
    return t.to(dtype) if dtype != torch.bool else t > 0


def ties_no_nan(shape, dtype, i):
    g = torch.Generator().manual_seed(i)
    t = torch.randint(-2, 3, shape, generator=g)
    return t.to(dtype) if dtype != torch.bool else t > 0


def with_nan(shape, dtype, i):
    t = torch.randn(shape, generator=torch.Generator().manual_seed(i)).to(dtype)
    if t.numel() > 3:
        t.view(-1)[1] = float("nan")
    return t


def small(shape, dtype, i):
    g = torch.Generator().manual_seed(i)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g) * 1.5 + 0.25).to(dtype)
    return torch.randint(1, 3, shape, generator=g).to(dtype)


CASES = [
    OpCase("sum", torch.sum, SHAPES, NUMERIC + (torch.bool,), grad=True),
    OpCase("sum_dim", lambda a: a.sum(-1), [[(3, 4)], [(2, 3, 4)], [(0, 3)]], NUMERIC, grad=True),
    OpCase("sum_dims_keepdim", lambda a: a.sum((0, 2), keepdim=True), [[(2, 3, 4)]], FLOATS + INTS, grad=True),
    OpCase("sum_empty_dims", lambda a: a.sum(()), [[(2, 3)]], FLOATS),
    OpCase("sum_dtype", lambda a: a.sum(1, dtype=torch.float64), [[(3, 4)]], FLOATS + INTS,
           out=lambda a, out: torch.sum(a, 1, dtype=torch.float64, out=out)),
    OpCase("sum_out", lambda a: torch.sum(a, 0), [[(3, 4)]], FLOATS, out=lambda a, out: torch.sum(a, 0, out=out)),
    OpCase("sum_0d_dim", lambda a: a.sum(0), [[()]], FLOATS),
    OpCase("bf16_large_sum", torch.sum, [[(4096,)]], (torch.bfloat16, torch.float16), low=0, high=1),
    OpCase("nansum", lambda a: torch.nansum(a, 1), [[(3, 4)]], FLOATS, make=with_nan),
    OpCase("mean", torch.mean, SHAPES, FLOATS, grad=True),
    OpCase("mean_dim", lambda a: a.mean((0, -1), keepdim=True), [[(2, 3, 4)], [(0, 3, 2)]], FLOATS, grad=True,
           out=lambda a, out: torch.mean(a, (0, -1), keepdim=True, out=out)),
    OpCase("mean_dtype", lambda a: a.mean(1, dtype=torch.float32), [[(3, 4)]], INTS + (torch.bfloat16,)),
    OpCase("prod", torch.prod, SHAPES, FLOATS + INTS + (torch.bool,), make=small, grad=True),
    OpCase("prod_dim", lambda a: a.prod(1, keepdim=True), [[(3, 4)], [(0, 3)]], FLOATS + INTS, make=small,
           grad=True),
    OpCase("max", torch.max, NONEMPTY, ALL, grad=True),
    OpCase("min", torch.min, NONEMPTY, ALL, grad=True),
    OpCase("max_nan", torch.max, [[(3, 4)]], FLOATS, make=with_nan),
    OpCase("max_dim", lambda a: a.max(1), [[(3, 4)], [(2, 3, 4)], [(0, 3)]], ALL, grad=True),
    OpCase("max_dim_keepdim", lambda a: a.max(0, keepdim=True), [[(3, 4)], [()]], FLOATS + INTS, grad=True),
    OpCase("min_dim", lambda a: a.min(-1), [[(3, 4)], [(2, 3, 4)]], ALL, grad=True),
    OpCase("max_dim_ties_nan", lambda a: a.max(1), [[(4, 7)], [(8, 3)]], FLOATS + INTS, make=ties),
    OpCase("min_dim_ties_nan", lambda a: a.min(0), [[(4, 7)], [(8, 3)]], FLOATS + INTS, make=ties),
    OpCase("max_dim_ties", lambda a: a.max(1), [[(4, 7)]], ALL, make=ties_no_nan),
    OpCase("argmax", torch.argmax, NONEMPTY, FLOATS + INTS, make=ties),
    OpCase("argmax_dim", lambda a: a.argmax(1, keepdim=True), [[(4, 7)], [(0, 3)]], FLOATS + INTS, make=ties),
    OpCase("argmin", lambda a: a.argmin(0), [[(4, 7)], [()]], FLOATS + INTS, make=ties),
    OpCase("argmin_all_keepdim", lambda a: a.argmin(keepdim=True), [[(4, 7)]], FLOATS + INTS, make=ties),
    OpCase("amax", lambda a: a.amax((0, 2)), [[(2, 3, 4)], [(3, 0, 2)]], FLOATS + INTS + (torch.bool,), grad=True),
    OpCase("amax_all", lambda a: a.amax(), [[(3, 4)], [()]], FLOATS + INTS, make=ties),
    OpCase("amin", lambda a: a.amin(1, keepdim=True), [[(3, 4)]], FLOATS + INTS, make=ties),
    OpCase("amin_grad", lambda a: a.amin(1, keepdim=True), [[(3, 4)]], FLOATS, make=ties_no_nan, grad=True),
    OpCase("aminmax", lambda a: torch.aminmax(a), [[(3, 4)]], FLOATS + INTS),
    OpCase("aminmax_dim", lambda a: torch.aminmax(a, dim=1, keepdim=True), [[(3, 4)]], FLOATS + INTS),
    OpCase("var", torch.var, SHAPES, FLOATS, grad=True),
    OpCase("var_dim", lambda a: a.var(1, unbiased=False, keepdim=True), [[(3, 4)], [(2, 3, 4)]],
           FLOAT + (torch.bfloat16,), grad=True),
    # f16 gradients differ from the CPU's f16 autograd arithmetic by an ulp.
    OpCase("var_dim_f16", lambda a: a.var(1, unbiased=False, keepdim=True), [[(3, 4)], [(2, 3, 4)]],
           (torch.float16,), grad=True, rtol=4e-3, atol=1e-3),
    OpCase("var_correction", lambda a: torch.var(a, (0, 2), correction=2), [[(2, 3, 4)]], FLOATS, grad=True),
    OpCase("var_correction_large", lambda a: torch.var(a, 1, correction=5), [[(3, 4)]], FLOAT),
    OpCase("std", torch.std, SHAPES, FLOATS, grad=True),
    OpCase("std_dim", lambda a: a.std(-1), [[(3, 4)], [(2, 3, 4)]], FLOATS, grad=True,
           out=lambda a, out: torch.std(a, -1, out=out)),
    OpCase("var_mean", lambda a: torch.var_mean(a, 1), [[(3, 4)]], FLOATS, grad=True),
    OpCase("std_mean", lambda a: torch.std_mean(a, (0, 1), keepdim=True, correction=0), [[(3, 4)]], FLOATS),
    OpCase("norm", torch.norm, SHAPES, FLOATS, grad=True),
    OpCase("norm_p1_dim", lambda a: a.norm(1, dim=1), [[(3, 4)]], FLOATS, grad=True),
    OpCase("vector_norm_3", lambda a: torch.linalg.vector_norm(a, 3, dim=(0, 1)), [[(3, 4)], [(2, 3, 4)]], FLOATS,
           grad=True),
    OpCase("vector_norm_0", lambda a: torch.linalg.vector_norm(a, 0), [[(3, 4)]], FLOATS, make=ties_no_nan),
    OpCase("vector_norm_inf", lambda a: torch.linalg.vector_norm(a, float("inf"), dim=1), [[(3, 4)]], FLOATS,
           grad=True),
    OpCase("vector_norm_neginf", lambda a: torch.linalg.vector_norm(a, float("-inf")), [[(3, 4)]], FLOATS),
    OpCase("vector_norm_half", lambda a: torch.linalg.vector_norm(a, 0.5, keepdim=True), [[(3, 4)]], FLOATS),
    OpCase("vector_norm_dtype", lambda a: torch.linalg.vector_norm(a, dtype=torch.float64), [[(3, 4)]], FLOAT),
    OpCase("linalg_norm", lambda a: torch.linalg.norm(a), [[(3, 4)]], FLOATS, grad=True),
    OpCase("any", lambda a: a.any(), SHAPES, ALL + (torch.uint8,), make=ties_no_nan),
    OpCase("any_dim", lambda a: a.any(1), [[(3, 4)], [(3, 0)]], ALL, make=ties_no_nan),
    OpCase("any_dims", lambda a: a.any((0, 1), keepdim=True), [[(3, 4, 2)]], ALL, make=ties_no_nan),
    OpCase("all", lambda a: a.all(), SHAPES, ALL + (torch.uint8,), make=ties_no_nan),
    OpCase("all_dim", lambda a: a.all(-1, keepdim=True), [[(3, 4)], [(3, 0)]], ALL, make=ties_no_nan),
    OpCase("all_nan", lambda a: a.all(1), [[(3, 4)]], FLOATS, make=with_nan),
    OpCase("count_nonzero", lambda a: torch.count_nonzero(a, 1), [[(3, 4)]], ALL, make=ties_no_nan),
    OpCase("count_nonzero_all", torch.count_nonzero, [[(3, 4)]], ALL, make=ties_no_nan),
    OpCase("logsumexp", lambda a: a.logsumexp(1), [[(3, 4)], [(2, 3, 4)], [(3, 0)]], FLOAT + (torch.bfloat16,),
           grad=True),
    OpCase("logsumexp_f16", lambda a: a.logsumexp(1), [[(3, 4)], [(2, 3, 4)]], (torch.float16,), grad=True,
           rtol=4e-3),
    OpCase("logsumexp_keepdim", lambda a: a.logsumexp((0, 1), keepdim=True), [[(3, 4)]], FLOATS, grad=True),
    OpCase("logsumexp_0d", lambda a: a.logsumexp(0), [[()]], FLOATS, grad=True),
    OpCase("logsumexp_int", lambda a: a.logsumexp(1), [[(3, 4)]], INTS),
    OpCase("logsumexp_inf", lambda a: a.logsumexp(1),  [[(3, 4)]], FLOATS,
           make=lambda s, d, i: torch.tensor([[float("-inf")] * 4, [float("inf"), 0, 1, 2], [0, 1, 2, 3]]).to(d)),
    OpCase("cumsum", lambda a: a.cumsum(1), [[(3, 4)], [(2, 3, 4)], [(0, 3)], [(3, 17)]], NUMERIC, grad=True,
           inplace=lambda a: a.cumsum_(1), out=lambda a, out: torch.cumsum(a, 1, out=out)),
    OpCase("cumsum_0d", lambda a: a.cumsum(0), [[()]], FLOATS + INTS, grad=True),
    OpCase("cumsum_bool", lambda a: a.cumsum(0), [[(5, 2)]], (torch.bool,)),
    OpCase("cumsum_dtype", lambda a: a.cumsum(0, dtype=torch.float64), [[(5, 2)]], FLOATS + INTS),
    OpCase("cumprod", lambda a: a.cumprod(-1), [[(3, 4)], [(2, 3, 4)], [()]], FLOATS + INTS, make=small,
           grad=True),
]


@parametrize(CASES)
def test_reduction(case, shapes, dtype):
    run_case(case, shapes, dtype)


# The CPU raises IndexError for these; PyTorch's meta kernels (which check
# the call on tpu) raise another type, so the error type differs.
INDEX_ERROR = pytest.mark.xfail(reason="meta kernel raises a different exception type than the CPU kernel",
                                strict=True)


@pytest.mark.parametrize("fn", [torch.max, torch.min, pytest.param(torch.argmax, marks=INDEX_ERROR), torch.amax,
                                torch.aminmax, lambda t: torch.linalg.vector_norm(t, float("inf"))])
def test_full_reduction_of_empty_raises(fn):
    same_error(fn, torch.empty(0, 3))


@pytest.mark.parametrize("fn", [lambda t: t.max(0), lambda t: t.min(0), lambda t: t.argmax(0)] + [
    pytest.param(f, marks=INDEX_ERROR) for f in (lambda t: t.amax(0), lambda t: torch.aminmax(t, dim=0))])
def test_reduction_over_empty_dim_raises(fn):
    same_error(fn, torch.empty(0, 3))


@pytest.mark.parametrize("fn", [lambda t: t.sum(2), lambda t: t.max(-3), lambda t: t.var(5), lambda t: t.logsumexp(3),
                                lambda t: t.cumsum(2), lambda t: t.argmax(2), lambda t: t.amax((0, 0))])
def test_bad_dims_raise(fn):
    same_error(fn, torch.randn(3, 4))


def test_mean_of_int_raises():
    same_error(torch.mean, torch.arange(4))
