"""Rules added for OpInfo coverage: special math, shrink/glu/prelu/logsigmoid
activations, scans and order statistics, search and histograms, masks,
Cholesky and triangular solves, max_unpool, legacy norm."""
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, INTS, OpCase, parametrize, run_case

S = [[(3, 4)], [(2, 3, 5)]]
B = [[(3, 4), (3, 4)], [(3, 4), (4,)]]


def g(i):
    return torch.Generator().manual_seed(i)


def unit(shape, dtype, i):
    return (torch.rand(shape, generator=g(i), dtype=torch.float64) * 0.9 + 0.05).to(dtype)


def positive(shape, dtype, i):
    return (torch.rand(shape, generator=g(i), dtype=torch.float64) * 4 + 0.5).to(dtype)


def spd(shape, dtype, i):
    a = torch.randn(shape, generator=g(i), dtype=torch.float64)
    return (a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)).to(dtype)


def lower_tri(shape, dtype, i):
    if i == 1:
        return torch.randn(shape, generator=g(i)).to(dtype)
    a = torch.randn(shape, generator=g(i), dtype=torch.float64).tril()
    return (a + 3 * torch.eye(shape[-1], dtype=torch.float64)).to(dtype)


def sorted_first(shape, dtype, i):
    t = torch.randn(shape, generator=g(i)) * 3
    return (t.sort(dim=-1).values if i == 0 else t).to(dtype)


def small_ints(shape, dtype, i):
    return torch.randint(-3, 4, shape, generator=g(i)).to(dtype)


CASES = [
    OpCase("copysign", torch.copysign, B, FLOATS, grad=True),
    OpCase("heaviside", torch.heaviside, [[(3, 4), (3, 4)]], FLOAT + INTS, make=small_ints),
    OpCase("hypot", torch.hypot, B, FLOATS, grad=True),
    OpCase("nextafter", torch.nextafter, B, FLOAT),
    OpCase("logaddexp2", torch.logaddexp2, B, FLOATS, grad=True),
    OpCase("sinc", torch.sinc, S, FLOATS, grad=True),
    OpCase("erfc", torch.erfc, S, FLOATS, grad=True),
    OpCase("lgamma", torch.lgamma, S, FLOATS, make=positive, grad=True),
    OpCase("digamma", torch.digamma, S, FLOATS, make=positive, grad=True),
    OpCase("polygamma2", lambda x: torch.polygamma(2, x), S, FLOAT, make=positive, rtol=1e-4),
    OpCase("special_i1e", torch.special.i1e, S, FLOAT),
    OpCase("angle", torch.angle, S, FLOATS),
    OpCase("xlog1py", torch.special.xlog1py, B, FLOATS, make=positive, grad=True),
    OpCase("entr", torch.special.entr, S, FLOATS, grad=True),
    OpCase("ndtri", torch.special.ndtri, S, FLOAT, make=unit),
    OpCase("zeta", torch.special.zeta, [[(3, 4), (3, 4)]], FLOAT, make=positive, rtol=1e-4),
    OpCase("hardshrink", F.hardshrink, S, FLOATS, grad=True),
    OpCase("softshrink", lambda x: F.softshrink(x, 0.7), S, FLOATS, grad=True),
    OpCase("logsigmoid", F.logsigmoid, S, FLOATS, grad=True),
    OpCase("prelu", lambda x, w: F.prelu(x, w), [[(2, 3, 4), (3,)], [(2, 3, 4), (1,)]], FLOAT, grad=True),
    OpCase("glu", lambda x: F.glu(x, 1), [[(3, 4)], [(2, 6, 5)]], (torch.float32, torch.bfloat16), grad=True),
    OpCase("cummax", lambda x: torch.cummax(x, 1), S, FLOAT + INTS, grad=True),
    OpCase("cummin", lambda x: torch.cummin(x, -1), S, FLOAT + INTS, grad=True),
    OpCase("logcumsumexp", lambda x: torch.logcumsumexp(x, 1), S, FLOATS, grad=True),
    OpCase("kthvalue", lambda x: torch.kthvalue(x, 2, 1), S, FLOAT, grad=True),
    OpCase("median", torch.median, S, FLOAT + INTS, grad=True),
    OpCase("median_dim", lambda x: torch.median(x, 1, keepdim=True), S, FLOAT, grad=True),
    OpCase("nanmedian_dim", lambda x: torch.nanmedian(x.masked_fill(x > 2, float("nan")), 0), S, FLOAT),
    OpCase("isin", torch.isin, [[(3, 4), (5,)]], FLOAT + INTS, make=small_ints),
    OpCase("trace", torch.trace, [[(3, 4)], [(4, 4)]], FLOAT + INTS, grad=True),
    OpCase("cross", lambda x, y: torch.linalg.cross(x, y), [[(4, 3), (4, 3)], [(2, 4, 3), (2, 4, 3)]], FLOAT, grad=True),
    OpCase("channel_shuffle", lambda x: F.channel_shuffle(x, 2), [[(2, 4, 3, 3)]], FLOAT),
    OpCase("renorm", lambda x: torch.renorm(x, 2, 0, 1.0), S, FLOAT, grad=True),
    OpCase("renorm_inf", lambda x: torch.renorm(x, float("inf"), 1, 1.0), S, FLOAT),
    OpCase("cdist", torch.cdist, [[(5, 3), (4, 3)], [(2, 5, 3), (2, 4, 3)]], FLOAT, rtol=1e-4, atol=1e-5),
    OpCase("cdist_p1", lambda x, y: torch.cdist(x, y, p=1), [[(5, 3), (4, 3)]], FLOAT),
    OpCase("logspace", lambda x: torch.logspace(-1, 2, 7, device=x.device), [[(1,)]], FLOAT, noncontiguous=False),
    OpCase("bucketize", lambda x, b: torch.bucketize(x, b), [[(3, 4), (6,)]], FLOAT,
           make=lambda s, d, i: sorted_first(s, d, 1 - i)),
    OpCase("searchsorted", lambda s, x: torch.searchsorted(s, x, right=True), [[(6,), (3, 4)], [(3, 6), (3, 4)]],
           FLOAT, make=sorted_first),
    OpCase("histc", lambda x: torch.histc(x, 5, -2, 2), S, FLOAT),
    OpCase("histc_data_range", lambda x: torch.histc(x, 4), S, FLOAT),
    OpCase("masked_scatter", lambda x, s: x.masked_scatter(x > 0, s), [[(3, 4), (12,)]], FLOAT),
    OpCase("frexp", torch.frexp, S, FLOATS),
    OpCase("logit_backward", lambda x: torch.logit(x, 0.1), S, FLOAT, make=unit, grad=True),
    OpCase("norm_p3", lambda x: torch.norm(x, 3, dim=1), S, FLOAT, grad=True),
    OpCase("norm_default", torch.norm, S, FLOAT, grad=True),
    OpCase("cholesky_ex", lambda a: torch.linalg.cholesky_ex(a), [[(4, 4)], [(2, 3, 3)]], FLOAT, make=spd,
           rtol=1e-4, atol=1e-5, grad=True),
    OpCase("cholesky_upper", lambda a: torch.linalg.cholesky(a, upper=True), [[(4, 4)]], FLOAT, make=spd,
           rtol=1e-4, atol=1e-5),
    OpCase("solve_triangular", lambda a, b: torch.linalg.solve_triangular(a, b, upper=False),
           [[(4, 4), (4, 2)], [(2, 3, 3), (3, 5)]], FLOAT, make=lower_tri, rtol=1e-4, atol=1e-5, grad=True),
    OpCase("solve_triangular_right", lambda a, b: torch.linalg.solve_triangular(a, b.mT, upper=False, left=False),
           [[(4, 4), (4, 2)]], FLOAT, make=lower_tri, rtol=1e-4, atol=1e-5),
    OpCase("triangular_solve", lambda b, a: torch.triangular_solve(b, a.mT, upper=True, transpose=True),
           [[(4, 2), (4, 4)]], FLOAT, make=lambda s, d, i: lower_tri(s, d, 1 - i), rtol=1e-4, atol=1e-5),
    OpCase("cholesky_solve", lambda b, a: torch.cholesky_solve(b, torch.linalg.cholesky(a)),
           [[(4, 2), (4, 4)]], FLOAT, make=lambda s, d, i: spd(s, d, i) if i else torch.randn(s, generator=g(i)),
           rtol=1e-4, atol=1e-5),
    OpCase("cholesky_inverse", lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a)), [[(4, 4)]], FLOAT,
           make=spd, rtol=1e-4, atol=1e-5),
    OpCase("max_unpool2d", lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
           [[(2, 3, 4, 6)]], FLOAT, grad=True),
]


@parametrize(CASES)
def test_op(case, shapes, dtype):
    run_case(case, shapes, dtype)
