"""torch.special's orthogonal polynomials P_n(x) (x and n both tensors):
the recurrence, its closed forms and edge cases against the CPU kernel."""
import pytest
import torch

from optest import OpCase, parametrize, run_case

POLYNOMIALS = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


def x_and_degree(shape, dtype, i):
    """x: inside and outside [-1, 1] with both interval ends and 0 and 0.5;
    n: degrees -2..12, so both the recurrence and the large-n closed forms run."""
    g = torch.Generator().manual_seed(i)
    if i == 1:
        return torch.randint(-2, 13, shape, generator=g).to(dtype)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 1.5
    flat = x.view(-1)
    k = min(4, flat.numel())
    flat[:k] = torch.tensor([1.0, -1.0, 0.0, 0.5], dtype=torch.float64)[:k]
    return x.to(dtype)


SHAPES = [[(3, 5), (5,)], [(0, 3), (3,)]]
CASES = [OpCase(name, getattr(torch.special, name), SHAPES, (torch.float32, torch.int64), make=x_and_degree, rtol=1e-5, atol=1e-5)
         for name in POLYNOMIALS]


@parametrize(CASES)
def test_polynomial_matches_cpu(case, shapes, dtype):
    run_case(case, shapes, dtype)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_edge_degrees(name):
    """NaN/inf/huge/fractional n and infinite x, as the CPU kernel treats them.
    (A NaN x is left out: the CPU kernels return an uninitialised accumulator
    there; tpu gives NaN.)"""
    f = getattr(torch.special, name)
    x = torch.tensor([0.3, -0.7, 2.0, 1.5, float("inf"), 0.0, 1.0, -1.0])
    n = torch.tensor([float("nan"), float("inf"), 1e30, 3.0, 2.0, 7.9, -0.5, 11.0])
    torch.testing.assert_close(f(x.to("tpu"), n.to("tpu")).cpu(), f(x, n), equal_nan=True)
    torch.testing.assert_close(f(x.to("tpu"), 3).cpu(), f(x, 3), equal_nan=True)  # a Python-number n
    assert f(torch.tensor([float("nan")], device="tpu"), torch.tensor([4.0], device="tpu")).isnan().all()


def test_polynomial_rejects_mismatched_shapes():
    with pytest.raises(RuntimeError):
        torch.special.legendre_polynomial_p(torch.ones(3, device="tpu"), torch.ones(4, device="tpu"))
