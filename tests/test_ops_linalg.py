"""Linear algebra rules (linalg_lu.cpp, linalg_qr.cpp, linalg_eig_svd.cpp):
LU and what is built on it (solve, inverse, determinants, matrix_exp),
Householder QR (geqrf, qr, householder_product, ormqr), Jacobi eigh and SVD.
Eigen- and singular vectors are compared up to sign (|V|), and through
reconstructions, as PyTorch's own OpInfo wrappers compare them."""
import pytest
import torch

from optest import OpCase, parametrize, run_case, same_error

F32 = (torch.float32,)
F3264 = (torch.float32, torch.float64)


def g(i):
    return torch.Generator().manual_seed(100 + i)


def well_conditioned(shape, dtype, i):
    """Random matrices with a dominant diagonal (square) or plain randn."""
    a = torch.randn(shape, generator=g(i), dtype=torch.float64)
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 0:
        a = a + 2 * torch.eye(shape[-1], dtype=torch.float64)
    return a.to(dtype)


def randn(shape, dtype, i):
    return torch.randn(shape, generator=g(i), dtype=torch.float64).to(dtype)


def distinct_spectrum(shape, dtype, i):
    """Matrices U diag(s) V^T with well-separated singular values."""
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    u, _ = torch.linalg.qr(torch.randn(shape[:-2] + (m, m), generator=g(i), dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(shape[:-2] + (n, n), generator=g(i + 1), dtype=torch.float64))
    s = torch.linspace(3.0, 0.5, k, dtype=torch.float64) if k else torch.zeros(0, dtype=torch.float64)
    return (u[..., :, :k] * s.unsqueeze(-2) @ v[..., :, :k].mT).to(dtype)


def symmetric_distinct(shape, dtype, i):
    n = shape[-1]
    q, _ = torch.linalg.qr(torch.randn(shape, generator=g(i), dtype=torch.float64))
    w = torch.linspace(-2.0, 3.0, n, dtype=torch.float64) if n else torch.zeros(0, dtype=torch.float64)
    return (q * w.unsqueeze(-2) @ q.mT).to(dtype)


SQ = [[(4, 4)], [(2, 3, 5, 5)], [(1, 1)], [(0, 3, 3)]]
RECT = [[(5, 3)], [(3, 5)], [(2, 4, 4)], [(0, 2, 3)]]
LSTSQ = [[(6, 3), (6, 2)], [(3, 5), (3, 2)], [(4, 4), (4,)], [(2, 5, 3), (2, 5, 2)], [(2, 1, 5, 3), (1, 3, 5, 4)],
         [(0, 4, 3), (0, 4, 2)], [(5, 3), (5, 0)]]
# PyTorch has no meta kernel for linalg_lstsq, so Dynamo cannot trace it: a
# compiled function breaks its graph there and runs lstsq eagerly on tpu.
NO_LSTSQ_META = {"compile": "linalg_lstsq has no meta kernel in PyTorch (Dynamo graph-breaks; eager on tpu)"}
SOLVE = [[(4, 4), (4, 2)], [(2, 3, 3), (3, 1)], [(3, 3), (2, 3, 3)], [(2, 4, 4), (2, 4)], [(0, 3, 3), (0, 3, 2)]]


def eigh_abs(x, uplo="L"):
    w, v = torch.linalg.eigh(x, UPLO=uplo)
    return w, v.abs()


def eigh_recon(x):
    w, v = torch.linalg.eigh(x)
    return v @ torch.diag_embed(w) @ v.mT


def svd_abs(x):
    u, s, vh = torch.linalg.svd(x, full_matrices=False)
    return u.abs(), s, vh.abs()


def svd_recon(x, full):
    u, s, vh = torch.linalg.svd(x, full_matrices=full)
    k = s.shape[-1]
    return u[..., :k] @ torch.diag_embed(s) @ vh[..., :k, :], u[..., :k] @ vh[..., :k, :]


CASES = [
    # LU family
    OpCase("lu_factor", torch.linalg.lu_factor, RECT + SQ, F3264, make=randn),
    OpCase("lu_factor_ex", torch.linalg.lu_factor_ex, SQ, F32, make=randn),
    OpCase("lu", torch.linalg.lu, RECT + SQ, F3264, make=randn),
    OpCase("lu_LU_grad", lambda x: torch.linalg.lu(x)[1:], [[(4, 4)], [(5, 3)], [(2, 3, 4)]], F32,
           make=well_conditioned, grad=True, rtol=1e-4, atol=1e-4),
    OpCase("lu_unpack", lambda x: torch.lu_unpack(*torch.linalg.lu_factor(x)), RECT + SQ, F32, make=randn),
    OpCase("lu_solve", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
           [[(4, 4), (4, 2)], [(2, 3, 3), (2, 3, 4)], [(3, 3), (2, 3, 1)]], F3264, make=well_conditioned, grad=True,
           rtol=1e-4, atol=1e-4),
    OpCase("lu_solve_adjoint_right",
           lambda a, b: (torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
                         torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False),
                         torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False, adjoint=True)),
           [[(4, 4), (4, 3)], [(2, 3, 3), (2, 3, 2)]], F32, make=well_conditioned, rtol=1e-4, atol=1e-5),
    OpCase("inv", torch.linalg.inv, SQ, F3264, make=well_conditioned, grad=True, rtol=1e-4, atol=1e-5),
    OpCase("inv_ex", torch.linalg.inv_ex, SQ, F32, make=well_conditioned),
    OpCase("det", torch.linalg.det, SQ + [[(0, 0)]], F3264, make=well_conditioned, grad=True, rtol=1e-4, atol=1e-5),
    OpCase("slogdet", lambda x: torch.linalg.slogdet(x)[::-1], SQ, F3264, make=randn, grad=True, rtol=1e-4, atol=1e-5),
    OpCase("logdet", torch.logdet, [[(3, 3)]], F32, make=well_conditioned),
    OpCase("solve", torch.linalg.solve, SOLVE, F3264, make=well_conditioned, grad=True, rtol=1e-4, atol=1e-5),
    OpCase("solve_left_false", lambda a, b: torch.linalg.solve(a, b, left=False),
           [[(4, 4), (2, 4)], [(2, 3, 3), (2, 5, 3)]], F32, make=well_conditioned, grad=True, rtol=1e-4, atol=1e-5),
    OpCase("solve_ex", torch.linalg.solve_ex, [[(4, 4), (4, 2)]], F32, make=well_conditioned),
    OpCase("matrix_exp", torch.linalg.matrix_exp, [[(3, 3)], [(2, 4, 4)], [(1, 1)], [(0, 2, 2)]], F3264,
           make=randn, grad=True, rtol=1e-4, atol=1e-5),
    # QR family
    OpCase("geqrf", torch.geqrf, RECT + SQ, F3264, make=randn),
    OpCase("qr", torch.linalg.qr, RECT + SQ, F3264, make=randn, grad=True, rtol=1e-4, atol=1e-5),
    OpCase("qr_complete", lambda x: torch.linalg.qr(x, mode="complete"), RECT, F32, make=randn),
    OpCase("qr_r", lambda x: torch.linalg.qr(x, mode="r")[1], RECT, F32, make=randn),
    OpCase("householder_product", lambda x, t: torch.linalg.householder_product(x, t),
           [[(5, 3), (3,)], [(4, 4), (2,)], [(2, 5, 4), (2, 4)]], F3264, make=randn, grad=True, rtol=1e-4, atol=1e-4),
    OpCase("ormqr", lambda x, c: (torch.ormqr(*torch.geqrf(x), c), torch.ormqr(*torch.geqrf(x), c, transpose=True)),
           [[(5, 3), (5, 2)], [(2, 4, 4), (2, 4, 3)]], F32, make=randn, rtol=1e-4, atol=1e-5),
    OpCase("ormqr_right", lambda x, c: (torch.ormqr(*torch.geqrf(x), c.mT, left=False),
                                        torch.ormqr(*torch.geqrf(x), c.mT, left=False, transpose=True)),
           [[(5, 3), (5, 2)]], F32, make=randn, rtol=1e-4, atol=1e-5),
    # Jacobi eigh and SVD
    OpCase("eigh", eigh_abs, [[(4, 4)], [(2, 5, 5)], [(1, 1)], [(0, 3, 3)]], F3264, make=symmetric_distinct,
           rtol=1e-4, atol=1e-5),
    OpCase("eigh_upper", lambda x: eigh_abs(x, "U"), [[(5, 5)], [(3, 3)]], F32, make=randn, rtol=1e-4, atol=1e-4),
    OpCase("eigh_recon", eigh_recon, [[(6, 6)], [(2, 7, 7)]], F32, make=symmetric_distinct, atol=1e-5, rtol=1e-4),
    OpCase("eigvalsh", torch.linalg.eigvalsh, [[(5, 5)], [(2, 4, 4)], [(17, 17)]], F3264, make=symmetric_distinct,
           grad=True, rtol=1e-4, atol=1e-5),
    OpCase("svd", svd_abs, [[(4, 4)], [(5, 3)], [(3, 5)], [(2, 4, 3)]], F3264, make=distinct_spectrum,
           rtol=1e-4, atol=1e-5),
    OpCase("svd_recon", lambda x: svd_recon(x, False), [[(6, 4)], [(4, 6)], [(2, 5, 5)]], F32, make=randn,
           rtol=1e-4, atol=1e-5),
    OpCase("svd_recon_full", lambda x: svd_recon(x, True), [[(6, 4)], [(4, 6)], [(0, 3)]], F32, make=randn,
           rtol=1e-4, atol=1e-5),
    OpCase("svdvals", torch.linalg.svdvals, [[(5, 3)], [(2, 3, 6)], [(20, 12)]], F3264, make=distinct_spectrum,
           grad=True, rtol=1e-4, atol=1e-5),
    OpCase("pinv", torch.linalg.pinv, [[(5, 3)], [(3, 4)]], F32, make=distinct_spectrum, grad=True,
           rtol=1e-4, atol=1e-5),
    OpCase("matrix_rank", torch.linalg.matrix_rank, [[(5, 3)], [(4, 4)]], F32, make=distinct_spectrum),
    OpCase("norm_nuc", lambda x: torch.linalg.matrix_norm(x, "nuc"), [[(4, 3)]], F32, make=distinct_spectrum,
           grad=True, rtol=1e-4, atol=1e-5),
    # lstsq (QR; full-rank systems): gelsy's (solution, rank), gels' residuals.
    OpCase("lstsq", lambda a, b: torch.linalg.lstsq(a, b)[:3], LSTSQ, F3264, make=randn, rtol=1e-4, atol=1e-4,
           skip_modes=NO_LSTSQ_META),
    OpCase("lstsq_solution_grad", lambda a, b: torch.linalg.lstsq(a, b).solution, LSTSQ[:3], F32, make=randn,
           grad=True, rtol=1e-3, atol=1e-4, skip_modes=NO_LSTSQ_META),
    OpCase("lstsq_gels", lambda a, b: torch.linalg.lstsq(a, b, driver="gels")[:2], LSTSQ, F3264, make=randn,
           rtol=1e-4, atol=1e-4, skip_modes=NO_LSTSQ_META),
    OpCase("lstsq_rcond", lambda a, b: torch.linalg.lstsq(a, b, rcond=1e-3)[0], LSTSQ[:1], F32, make=randn,
           rtol=1e-4, atol=1e-4, skip_modes=NO_LSTSQ_META),
]


@parametrize(CASES)
def test_linalg(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_lu_singular_pivots_and_info():
    a = torch.tensor([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]])
    for m in (a, torch.zeros(3, 3)):
        lu, piv, info = torch.linalg.lu_factor_ex(m)
        lu_t, piv_t, info_t = torch.linalg.lu_factor_ex(m.to("tpu"))
        torch.testing.assert_close(lu_t.cpu(), lu)
        assert torch.equal(piv_t.cpu(), piv) and torch.equal(info_t.cpu(), info)


def test_slogdet_singular():
    a = torch.tensor([[1.0, 2], [2, 4]])
    s, l = torch.linalg.slogdet(a.to("tpu"))
    assert s.item() == 0 and l.item() == float("-inf")


def test_larger_matrices():
    """Loops keep the program small; results stay accurate at n = 64."""
    a = well_conditioned((64, 64), torch.float32, 0)
    torch.testing.assert_close(torch.linalg.inv(a.to("tpu")).cpu(), torch.linalg.inv(a), rtol=1e-4, atol=1e-5)
    s = symmetric_distinct((64, 64), torch.float32, 1)
    torch.testing.assert_close(torch.linalg.eigvalsh(s.to("tpu")).cpu(), torch.linalg.eigvalsh(s), rtol=1e-4, atol=1e-4)
    r = randn((64, 48), torch.float32, 2)
    torch.testing.assert_close(torch.linalg.svdvals(r.to("tpu")).cpu(), torch.linalg.svdvals(r), rtol=1e-4, atol=1e-4)


def test_bad_inputs():
    a = torch.randn(3, 3)
    same_error(lambda x: torch.linalg.lu_factor(x, pivot=False), a)
    same_error(lambda x: torch.linalg.lu(x, pivot=False), a)
    same_error(lambda x: torch.linalg.qr(x, mode="bogus"), a)
    with pytest.raises(RuntimeError, match="LU without pivoting"):
        torch.linalg.lu_factor(a.to("tpu"), pivot=False)


def test_lstsq_rank_deficient_raises_and_drivers():
    a = torch.randn(5, 3, generator=g(7))
    a[:, 2] = a[:, 1]
    with pytest.raises(RuntimeError, match="must have full rank"):
        torch.linalg.lstsq(a.to("tpu"), torch.randn(5, 2).to("tpu")).solution.cpu()
    torch.tpu.synchronize()
    b = torch.randn(5, 2)
    same_error(lambda x, y: torch.linalg.lstsq(x, y, driver="bogus"), torch.randn(5, 3), b)
    same_error(torch.linalg.lstsq, torch.randn(5, 3), torch.randn(4, 2))
    same_error(torch.linalg.lstsq, torch.randn(5, 3).half(), b.half())


@pytest.mark.parametrize("view", ["contiguous", "transposed", "strided"])
def test_det_and_slogdet_gradients_follow_the_inputs_contiguity(view):
    """PyTorch factors A^T for a contiguous A and A otherwise, and its backward
    reads that LU; a non-contiguous A must get the LU of A."""
    a = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64).float()
    pick = {"contiguous": lambda t: t[..., :4].contiguous(), "transposed": lambda t: t[..., :4].mT,
            "strided": lambda t: t[..., ::2]}[view]
    for fn in (torch.linalg.det, lambda x: torch.linalg.slogdet(x)[1]):
        cpu, tpu = a.clone().requires_grad_(), a.to("tpu").requires_grad_()
        fn(pick(cpu)).sum().backward()
        fn(pick(tpu)).sum().backward()
        torch.testing.assert_close(tpu.grad.cpu(), cpu.grad, rtol=1e-4, atol=1e-4)
