"""Special functions: the orthogonal polynomials (Chebyshev, shifted
Chebyshev, Hermite, Laguerre, Legendre), the Bessel family (i0, i0e, i1,
modified Bessel I/K, scaled K, J0/J1/Y0/Y1, spherical j0, Airy Ai), erfcx,
log_ndtr, igamma/igammac, digamma and polygamma; compared with the CPU."""
import pytest
import torch

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case

B = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(0, 3), (0, 3)]]
S = [[(4, 5)], [(2, 3, 4)], [(0, 3)]]


def g(i):
    return torch.Generator().manual_seed(i)


def uniform(shape, lo, hi, i):
    return torch.rand(shape, generator=g(i), dtype=torch.float64) * (hi - lo) + lo


def with_points(t, points):
    """`t` with its first elements replaced by special points (where it has room)."""
    flat = t.reshape(-1).clone()
    k = min(len(points), flat.numel())
    flat[:k] = torch.tensor(points[:k], dtype=flat.dtype)
    return flat.reshape(t.shape)


def poly_args(lo=-1.5, hi=1.5, points=(1.0, -1.0, 0.0, 0.5)):
    """x uniform in [lo, hi] with exact special points; n integers in [-2, 14]
    (past the CPU's switch to the trigonometric forms), some non-integer."""
    def make(shape, dtype, i):
        if i == 0:
            return with_points(uniform(shape, lo, hi, 11), list(points)).to(dtype)
        n = torch.randint(-2, 15, shape, generator=g(12)).to(torch.float64)
        if dtype.is_floating_point:
            n = with_points(n, [3.7, -0.5, 9.0, 12.0])
        return n.to(dtype)
    return make


def real_range(lo, hi, points=()):
    def make(shape, dtype, i):
        return with_points(uniform(shape, lo, hi, 20 + i), list(points)).to(dtype)
    return make


def poly(name, fn, lo=-1.5, hi=1.5, points=(1.0, -1.0, 0.0, 0.5)):
    return OpCase(name, fn, B, FLOAT + (torch.int64,), make=poly_args(lo, hi, points), noncontiguous=True)


SHIFTED_POINTS = (1.0, 0.0, 0.5, 0.25)
sp = torch.special

CASES = [
    poly("chebyshev_t", sp.chebyshev_polynomial_t),
    poly("chebyshev_u", sp.chebyshev_polynomial_u),
    poly("chebyshev_v", sp.chebyshev_polynomial_v),
    poly("chebyshev_w", sp.chebyshev_polynomial_w),
    poly("chebyshev_t_wide", sp.chebyshev_polynomial_t, -4, 4),
    poly("shifted_chebyshev_t", sp.shifted_chebyshev_polynomial_t, -0.5, 1.5, SHIFTED_POINTS),
    poly("shifted_chebyshev_u", sp.shifted_chebyshev_polynomial_u, -0.5, 1.5, SHIFTED_POINTS),
    poly("shifted_chebyshev_v", sp.shifted_chebyshev_polynomial_v, -0.5, 1.5, SHIFTED_POINTS),
    poly("shifted_chebyshev_w", sp.shifted_chebyshev_polynomial_w, -0.5, 1.5, SHIFTED_POINTS),
    poly("hermite_h", sp.hermite_polynomial_h, -3, 3),
    poly("hermite_he", sp.hermite_polynomial_he, -3, 3),
    poly("laguerre_l", sp.laguerre_polynomial_l, -2, 6),
    poly("legendre_p", sp.legendre_polynomial_p),
    OpCase("chebyshev_t_n_scalar", lambda x: sp.chebyshev_polynomial_t(x, 9), S, FLOAT, make=real_range(-1.2, 1.2)),
    OpCase("legendre_p_x_scalar", lambda n: sp.legendre_polynomial_p(0.3, n), [[(3, 4)]], FLOAT,
           make=lambda s, d, i: torch.randint(-1, 12, s, generator=g(3)).to(d)),
    OpCase("hermite_h_large_n", lambda x, n: sp.hermite_polynomial_h(x, n * 40), [[(3, 4), (3, 4)]], FLOAT,
           make=poly_args(-1, 1)),
    # Bessel family
    OpCase("i0", torch.i0, S, FLOATS, make=real_range(-12, 12, (0.0, 8.0, -8.0)), grad=True),
    OpCase("i0e", sp.i0e, S, FLOATS, make=real_range(-20, 20, (0.0, 8.0)), grad=True),
    OpCase("i1", sp.i1, S, FLOATS, make=real_range(-12, 12, (0.0, 8.0))),
    OpCase("i1_grad", sp.i1, S, FLOAT, make=real_range(-12, 12, (0.0, 8.0)), grad=True),
    OpCase("modified_bessel_i0", sp.modified_bessel_i0, S, FLOAT, make=real_range(-12, 12, (0.0, 8.0))),
    OpCase("modified_bessel_i1", sp.modified_bessel_i1, S, FLOAT, make=real_range(-12, 12, (0.0, 8.0))),
    OpCase("modified_bessel_k0", sp.modified_bessel_k0, S, FLOAT, make=real_range(-1, 10, (0.0, 2.0))),
    OpCase("modified_bessel_k1", sp.modified_bessel_k1, S, FLOAT, make=real_range(-1, 10, (0.0, 2.0))),
    OpCase("scaled_modified_bessel_k0", sp.scaled_modified_bessel_k0, S, FLOAT, make=real_range(-1, 30, (0.0, 2.0))),
    OpCase("scaled_modified_bessel_k1", sp.scaled_modified_bessel_k1, S, FLOAT, make=real_range(-1, 30, (0.0, 2.0))),
    OpCase("bessel_j0", sp.bessel_j0, S, FLOAT, make=real_range(-20, 20, (0.0, 5.0, 1e-6)), atol=2e-6),
    OpCase("bessel_j1", sp.bessel_j1, S, FLOAT, make=real_range(-20, 20, (0.0, 5.0)), atol=2e-6),
    OpCase("bessel_y0", sp.bessel_y0, S, FLOAT, make=real_range(-1, 20, (0.0, 5.0)), atol=2e-6),
    OpCase("bessel_y1", sp.bessel_y1, S, FLOAT, make=real_range(-1, 20, (0.0, 5.0)), atol=2e-6),
    OpCase("spherical_bessel_j0", sp.spherical_bessel_j0, S, FLOAT,
           make=real_range(-15, 15, (0.0, 0.25, float("inf")))),
    OpCase("airy_ai", sp.airy_ai, S, FLOAT, make=real_range(-12, 12, (0.0, 2.09, -2.09, 9.0, 110.0, float("inf")))),
    OpCase("bessel_int", sp.bessel_j0, [[(3, 4)]], (torch.int64,)),
    # error-function relatives
    OpCase("erfcx", sp.erfcx, S, FLOAT, make=real_range(-8, 60, (0.0, -30.0, 1e8, -6.2)), grad=True),
    OpCase("log_ndtr", sp.log_ndtr, S, FLOAT, make=real_range(-30, 8, (0.0, -1.0, -0.5)), grad=True),
    # gamma family
    OpCase("digamma", torch.digamma, S, FLOATS, make=real_range(-6, 12, (0.0, -2.0, 10.0, -2.9999)), grad=True),
    OpCase("polygamma0", lambda x: torch.polygamma(0, x), S, FLOAT, make=real_range(-6, 12, (-1.5, 0.5)), grad=True),
    OpCase("polygamma1", lambda x: torch.polygamma(1, x), S, FLOATS, make=real_range(-6, 12, (-1.5, 0.25)),
           grad=True),
    OpCase("polygamma2", lambda x: torch.polygamma(2, x), S, FLOAT, make=real_range(-6, 12, (-2.0, 0.1))),
    OpCase("polygamma3", lambda x: torch.polygamma(3, x), S, FLOAT, make=real_range(-6, 12, (1e-3, 30.0))),
    OpCase("polygamma4", lambda x: torch.polygamma(4, x), S, FLOAT, make=real_range(-6, 12)),
]


@parametrize(CASES)
def test_op(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_polygamma_negative_n_rejected():
    x = torch.rand(3)
    with pytest.raises(RuntimeError):
        torch.polygamma(-1, x)
    with pytest.raises(RuntimeError):
        torch.polygamma(-1, x.to("tpu"))


def gamma_args(shape, dtype, i):
    """a and x spread over every regime of SciPy's igamma (power series,
    continued fraction, asymptotic expansion for large a near x), with
    boundary points."""
    big = uniform(shape, 0, 1, 34) > 0.5
    a = torch.where(big, uniform(shape, 20, 250, 31), uniform(shape, 0.05, 4, 30))
    if i == 0:
        return with_points(a, [0.0, 1.0, float("inf"), 2.0, 0.5]).to(dtype)
    x = torch.where(uniform(shape, 0, 1, 35) > 0.3, a * uniform(shape, 0.0, 2.0, 32), uniform(shape, 0, 2, 33))
    return with_points(x, [1.0, 0.0, 5.0, float("inf"), 0.3, 1.05]).to(dtype)


GB = [[(6, 8), (6, 8)], [(0, 3), (0, 3)]]
CASES_GAMMA = [
    OpCase("igamma", torch.igamma, GB, FLOATS, make=gamma_args, rtol=1e-5),
    OpCase("igammac", torch.igammac, GB, FLOATS, make=gamma_args, rtol=1e-5),
    OpCase("igamma_negative", torch.igamma, [[(3, 4), (3, 4)]], FLOAT),
]


@parametrize(CASES_GAMMA)
def test_gamma(case, shapes, dtype):
    run_case(case, shapes, dtype)


POLYNOMIALS = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_edge_degrees(name):
    """NaN/inf/huge/fractional n and infinite x, as the CPU kernel treats them.
    (A NaN x is left out: the CPU kernels return an uninitialised accumulator
    there.)"""
    f = getattr(torch.special, name)
    x = torch.tensor([0.3, -0.7, 2.0, 1.5, float("inf"), 0.0, 1.0, -1.0])
    n = torch.tensor([float("nan"), float("inf"), 1e30, 3.0, 2.0, 7.9, -0.5, 11.0])
    torch.testing.assert_close(f(x.to("tpu"), n.to("tpu")).cpu(), f(x, n), equal_nan=True)
    torch.testing.assert_close(f(x.to("tpu"), 3).cpu(), f(x, 3), equal_nan=True)  # a Python-number n
