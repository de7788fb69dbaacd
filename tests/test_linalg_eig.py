"""linalg.eig and linalg.eigvals (linalg_eig_general.cpp): the general
eigen-decomposition, compared with the CPU (LAPACK's geev).

Eigenvalues come in another order than LAPACK's and eigenvectors carry a
free phase, so rows compare permutation- and phase-invariant functions:
sorted real parts, sorted imaginary parts and sorted moduli of the
eigenvalues; the residual A V - V diag(L); the column norms. The dedicated
tests match eigenvalues as sets and eigenvectors column by column up to a
unit complex factor."""
import pytest
import torch

from torch_tpu import settings

from optest import OpCase, parametrize, run_case, same_error

DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
# Each size and dtype builds its own eig programs: the default tier sweeps 0, 1, 3, 8 and 16, the
# heavy tier (TORCH_TPU_HEAVY=1) 2 and 5 as well (CI time budget).
SIZES = (0, 1, 2, 3, 5, 8, 16) if settings.get("TORCH_TPU_HEAVY") else (0, 1, 3, 8, 16)
# The precision each dtype's eigenvalues reach for these well-conditioned inputs.
TOL = {torch.float32: 1e-4, torch.complex64: 1e-4, torch.float64: 1e-10, torch.complex128: 1e-10}


def g(i):
    return torch.Generator().manual_seed(300 + i)


def random(shape, dtype, i=0):
    if dtype.is_complex:
        return torch.randn(shape, generator=g(i), dtype=torch.complex128).to(dtype)
    return torch.randn(shape, generator=g(i), dtype=torch.float64).to(dtype)


def conjugate_pairs(n, dtype):
    """Real rotation blocks: eigenvalues 1 +- 2i, -0.5 +- 1i, ..., in a random basis."""
    d = torch.zeros(n, n, dtype=torch.float64)
    for k in range(0, n - 1, 2):
        a, b = 1.0 - 1.5 * k / 2, 2.0 - 0.5 * k / 2
        d[k:k + 2, k:k + 2] = torch.tensor([[a, b], [-b, a]], dtype=torch.float64)
    if n % 2:
        d[-1, -1] = 3.0
    s = torch.randn(n, n, generator=g(n), dtype=torch.float64) + 3 * torch.eye(n, dtype=torch.float64)
    return (s @ d @ torch.linalg.inv(s)).to(dtype)


def repeated(n, dtype):
    """Diagonalisable with repeated eigenvalues (2, 2, 2, -1, -1, ...), no Jordan blocks."""
    w = torch.tensor([2.0 if k % 2 == 0 else -1.0 for k in range(n)], dtype=torch.float64)
    s = torch.randn(n, n, generator=g(n + 1), dtype=torch.float64) + 3 * torch.eye(n, dtype=torch.float64)
    return (s @ torch.diag(w) @ torch.linalg.inv(s)).to(dtype)


def triangular(n, dtype):
    return torch.triu(random((n, n), dtype, n + 2)) + torch.diag(torch.arange(n, dtype=torch.float64)).to(dtype)


def symmetric(n, dtype):
    a = random((n, n), dtype, n + 3)
    return a + a.mT.conj()


KINDS = {"random": lambda n, dt: random((n, n), dt, n), "conjugate_pairs": conjugate_pairs,
         "repeated": repeated, "triangular": triangular, "symmetric": symmetric}


# ---- table rows: invariant functions of the decomposition, in all three modes

def spectrum(L):
    return (L.real.sort(-1).values, L.imag.sort(-1).values, L.abs().sort(-1).values)


def eigvals_invariants(x):
    return spectrum(torch.linalg.eigvals(x))


def eig_invariants(x):
    L, V = torch.linalg.eig(x)
    A = x.to(L.dtype)
    residual = A @ V - V * L.unsqueeze(-2)
    return spectrum(L) + (residual.abs(), torch.linalg.vector_norm(V, dim=-2))


def make_random(shape, dtype, i):
    return random(shape, dtype, i)


EIG_SHAPES = [[(5, 5)], [(2, 3, 4, 4)], [(1, 1)], [(0, 3, 3)], [(8, 8)]]
CASES = [
    OpCase("eigvals", eigvals_invariants, EIG_SHAPES, DTYPES, make=make_random, rtol=1e-4, atol=1e-4),
    OpCase("eig", eig_invariants, EIG_SHAPES, DTYPES, make=make_random, rtol=1e-4, atol=1e-4),
]


@parametrize(CASES)
def test_op(case, shapes, dtype):
    run_case(case, shapes, dtype)


# ---- eigenvalues as sets, eigenvectors up to phase

def match(actual, expected, tol):
    """The permutation of `actual` (1-D complex) nearest to `expected`,
    greedily; asserts every pair is within tol * (1 + max |expected|)."""
    scale = tol * (1 + (expected.abs().max().item() if expected.numel() else 0))
    left = list(range(actual.numel()))
    order = []
    for e in expected.tolist():
        j = min(left, key=lambda k: abs(actual[k].item() - e))
        assert abs(actual[j].item() - e) <= scale, f"eigenvalue {e} unmatched: nearest {actual[j].item()}"
        left.remove(j)
        order.append(j)
    return order


def check_eig(A, L, V, tol):
    """L, V (from tpu) against the CPU's decomposition of A."""
    Lc, Vc = torch.linalg.eig(A)
    assert L.dtype == Lc.dtype and V.dtype == Vc.dtype and L.shape == Lc.shape and V.shape == Vc.shape
    n = A.shape[-1]
    if n == 0:
        return
    Ac = A.to(L.dtype)
    norm = torch.linalg.matrix_norm(Ac).clamp_min(1e-30)
    res = torch.linalg.matrix_norm(Ac @ V - V * L.unsqueeze(-2)) / norm
    assert res.max() <= tol, f"residual {res.max()}"
    torch.testing.assert_close(torch.linalg.vector_norm(V, dim=-2), torch.ones(L.shape, dtype=L.real.dtype),
                               rtol=tol, atol=tol)
    for b in range(L.reshape(-1, n).shape[0]):
        l, lc = L.reshape(-1, n)[b], Lc.reshape(-1, n)[b]
        order = match(l, lc, tol)
        gaps = (lc.unsqueeze(0) - lc.unsqueeze(1)).abs() + torch.eye(n) * 1e9
        if gaps.min() > 0.1:  # distinct eigenvalues: vectors unique up to phase
            v, vc = V.reshape(-1, n, n)[b][:, order], Vc.reshape(-1, n, n)[b]
            phase = (vc.conj() * v).sum(0)
            torch.testing.assert_close(phase.abs(), torch.ones(n, dtype=phase.real.dtype), rtol=0, atol=100 * tol)
            torch.testing.assert_close(v, vc * (phase / phase.abs()).unsqueeze(0), rtol=0, atol=100 * tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("n", SIZES)
def test_eig_matches_cpu(n, kind, dtype):
    A = KINDS[kind](n, dtype)
    L, V = torch.linalg.eig(A.to("tpu"))
    check_eig(A, L.cpu(), V.cpu(), TOL[dtype])
    lv = torch.linalg.eigvals(A.to("tpu")).cpu()
    assert lv.dtype == L.dtype and lv.shape == L.shape
    if n:
        match(lv, torch.linalg.eigvals(A), TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_batched(dtype):
    A = random((2, 3, 5, 5), dtype, 1)
    L, V = torch.linalg.eig(A.to("tpu"))
    check_eig(A, L.cpu(), V.cpu(), TOL[dtype])


def test_views():
    A = random((6, 6), torch.float32, 2)
    for view in (lambda t: t.mT, lambda t: t[1:5, 1:5], lambda t: t[::2, ::2]):
        L, V = torch.linalg.eig(view(A.to("tpu")))
        check_eig(view(A).contiguous(), L.cpu(), V.cpu(), 1e-4)


def test_out():
    A = random((4, 4), torch.float64, 3)
    L = torch.empty(0, dtype=torch.complex128, device="tpu")
    V = torch.empty(0, dtype=torch.complex128, device="tpu")
    r = torch.linalg.eig(A.to("tpu"), out=(L, V))
    assert r[0] is L and r[1] is V
    check_eig(A, L.cpu(), V.cpu(), 1e-10)
    out = torch.empty(0, dtype=torch.complex128, device="tpu")
    torch.linalg.eigvals(A.to("tpu"), out=out)
    match(out.cpu(), torch.linalg.eigvals(A), 1e-10)


def test_largest_component_is_real():
    """As LAPACK's geev: each eigenvector's largest component is real."""
    A = random((6, 6), torch.complex128, 4)
    _, V = torch.linalg.eig(A.to("tpu"))
    V = V.cpu()
    big = V.abs().argmax(0)
    top = V[big, torch.arange(6)]
    assert (top.imag == 0).all() and (top.real > 0).all()


@pytest.mark.parametrize("n", (16, 32, 64))
def test_residual_at_rounding_level(n):
    A = random((n, n), torch.float32, 5)
    L, V = torch.linalg.eig(A.to("tpu"))
    L, V = L.cpu().to(torch.complex128), V.cpu().to(torch.complex128)
    Ac = A.to(torch.complex128)
    res = torch.linalg.matrix_norm(Ac @ V - V * L) / torch.linalg.matrix_norm(Ac)
    assert res < 2e-5, res


HARD = {
    "zero": lambda: torch.zeros(5, 5),
    "identity": lambda: torch.eye(5),
    "cyclic_permutation": lambda: torch.eye(6)[[1, 2, 3, 4, 5, 0]],
    "huge": lambda: random((6, 6), torch.float64, 7) * 1e30,
    "tiny": lambda: random((6, 6), torch.float64, 8) * 1e-30,
    "graded": lambda: random((8, 8), torch.float64, 9) * (10.0 ** -torch.arange(8.0, dtype=torch.float64)),
    "jordan": lambda: 2 * torch.eye(8) + torch.diag(torch.ones(7), 1),
    "nilpotent": lambda: torch.diag(torch.ones(15), 1),
}
DEFECTIVE = ("jordan", "nilpotent")


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("kind", sorted(HARD))
def test_hard_matrices(kind, dtype):
    """Extreme scales and defective matrices: finite results, a small
    residual, and (where the eigenvalues are well conditioned) the CPU's
    eigenvalues. Defective eigenvectors are not unique: only the residual."""
    A = HARD[kind]().to(dtype)
    L, V = (t.cpu().to(torch.complex128) for t in torch.linalg.eig(A.to("tpu")))
    assert torch.isfinite(torch.view_as_real(L)).all() and torch.isfinite(torch.view_as_real(V)).all()
    Ac = A.to(torch.complex128)
    tol = TOL[dtype] / 10
    res = torch.linalg.matrix_norm(Ac @ V - V * L) / torch.linalg.matrix_norm(Ac).clamp_min(1e-300)
    assert res <= tol, res
    if kind not in DEFECTIVE:
        Lc = torch.linalg.eigvals(A).to(torch.complex128)
        scale = Lc.abs().max().clamp_min(1e-300)
        match(L / scale, Lc / scale, tol)


# ---- gradients: gauge-invariant functions, natively on tpu

def eigvals_abs(A):
    return torch.linalg.eigvals(A).abs().sum()


def eigvals_real(A):
    return torch.linalg.eigvals(A).real.sum()


def reconstruction(A):
    L, V = torch.linalg.eig(A)
    return (V @ torch.diag_embed(L) @ torch.linalg.inv(V)).real.sum()


def vectors_abs(A):
    L, V = torch.linalg.eig(A)
    return V.abs().sum() + L.imag.abs().sum()


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.complex128), ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("fn", (eigvals_abs, eigvals_real, reconstruction, vectors_abs), ids=lambda f: f.__name__)
def test_grad(fn, dtype):
    A = random((2, 4, 4), dtype, 6)
    a = A.clone().requires_grad_()
    fn(a).backward()
    b = A.to("tpu").requires_grad_()
    fn(b).backward()
    tol = 1e-4 if dtype == torch.float32 else 1e-9
    torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=tol, atol=tol)


# ---- bad input

def test_non_square():
    same_error(torch.linalg.eig, torch.randn(3, 4))
    same_error(torch.linalg.eigvals, torch.randn(2, 3, 4))


@pytest.mark.parametrize("bad", (float("nan"), float("inf")))
def test_non_finite(bad):
    x = torch.randn(3, 3)
    x[1, 2] = bad
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eig(x)
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eig(x.to("tpu"))[0].cpu()
    # The CPU's eigvals does not check (LAPACK reports a bad argument); tpu raises as eig does.
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eigvals(x.to("tpu")).cpu()


@pytest.mark.parametrize("fn", (torch.linalg.eig, torch.linalg.eigvals), ids=("eig", "eigvals"))
@pytest.mark.parametrize("x", (torch.randn(3), torch.ones(3, 3, dtype=torch.int64), torch.ones(3, dtype=torch.int32),
                               torch.ones(3, 3, dtype=torch.bool), torch.randn(3, 3, dtype=torch.bfloat16),
                               torch.randn(3, 3, dtype=torch.float16)),
                         ids=("1d", "int64", "int32_1d", "bool", "bfloat16", "float16"))
def test_bad_input(fn, x):
    """The CPU's exception types (PyTorch's meta kernel raises others for
    some of these; the backend leaves them to the rule)."""
    same_error(fn, x)


def test_complex_lu_used_by_the_backward():
    """eig's backward solves with complex matrices: LU pivots as LAPACK's
    (largest |re| + |im|), and solve/inv/det on complex input."""
    A = random((2, 5, 5), torch.complex128, 10)
    B = random((2, 5, 3), torch.complex128, 11)
    LU, piv = torch.linalg.lu_factor(A.to("tpu"))
    LUc, pivc = torch.linalg.lu_factor(A)
    assert torch.equal(piv.cpu(), pivc)
    torch.testing.assert_close(LU.cpu(), LUc)
    torch.testing.assert_close(torch.linalg.solve(A.to("tpu"), B.to("tpu")).cpu(), torch.linalg.solve(A, B))
    torch.testing.assert_close(torch.linalg.solve(A.to("tpu"), B.mT.to("tpu"), left=False).cpu(),
                               torch.linalg.solve(A, B.mT, left=False))
    torch.testing.assert_close(torch.linalg.inv(A.to("tpu")).cpu(), torch.linalg.inv(A))
    torch.testing.assert_close(torch.linalg.det(A.to("tpu")).cpu(), torch.linalg.det(A))
