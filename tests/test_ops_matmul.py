"""Matrix products: mm, bmm, addmm, baddbmm, addbmm, dot, mv, addmv, addr, and
the composites torch.matmul (1-D..4-D, broadcasting) and F.linear that
decompose into them; softmax / log_softmax and their backward."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, INTS, OpCase, parametrize, run_case, same_error

# bf16/f16 products of length-k dot products round once; allow for k terms.
LOOSE = dict(rtol=2e-2, atol=2e-2)



def out_float32(op):
    """op(..., out_dtype=torch.float32) on tpu. The CPU has no out_dtype kernels
    (CUDA has): its reference is the float32 op on the same values."""
    def f(*xs):
        if xs[0].device.type == "cpu":
            return op(*[x.float() for x in xs])
        return op(*xs, out_dtype=torch.float32)
    return f


CASES = [
    OpCase("mm", torch.mm, [[(3, 4), (4, 5)], [(0, 4), (4, 2)], [(3, 0), (0, 2)]], FLOATS + INTS, grad=True,
           out=torch.mm, **LOOSE),
    OpCase("bmm", torch.bmm, [[(2, 3, 4), (2, 4, 5)], [(0, 3, 4), (0, 4, 2)]], FLOATS + INTS, grad=True,
           out=torch.bmm, **LOOSE),
    OpCase("addmm", torch.addmm, [[(3, 5), (3, 4), (4, 5)], [(5,), (3, 4), (4, 5)], [(), (3, 4), (4, 5)]],
           FLOATS + INTS, grad=True, inplace=lambda s, a, b: s.addmm_(a, b), out=torch.addmm, **LOOSE),
    OpCase("addmm_scaled", lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2), [[(3, 5), (3, 4), (4, 5)]],
           FLOATS, grad=True, **LOOSE),
    OpCase("addmm_int_scaled", lambda s, a, b: torch.addmm(s, a, b, beta=2, alpha=3), [[(3, 5), (3, 4), (4, 5)]],
           INTS),
    OpCase("addmm_beta0_ignores_nan", lambda s, a, b: torch.addmm(s * float("nan"), a, b, beta=0),
           [[(3, 5), (3, 4), (4, 5)]], FLOAT),
    OpCase("baddbmm", lambda s, a, b: torch.baddbmm(s, a, b, beta=0.5, alpha=1.5),
           [[(2, 3, 5), (2, 3, 4), (2, 4, 5)], [(3, 5), (2, 3, 4), (2, 4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("addbmm", torch.addbmm, [[(3, 5), (2, 3, 4), (2, 4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("dot", torch.dot, [[(4,), (4,)], [(0,), (0,)]], FLOATS + INTS, grad=True, **LOOSE),
    OpCase("mv", torch.mv, [[(3, 4), (4,)]], FLOATS + INTS, grad=True, **LOOSE),
    OpCase("addmv", lambda s, m, v: torch.addmv(s, m, v, alpha=2), [[(3,), (3, 4), (4,)], [(), (3, 4), (4,)]],
           FLOATS, grad=True, **LOOSE),
    OpCase("addr", lambda s, a, b: torch.addr(s, a, b, beta=2), [[(3, 4), (3,), (4,)]], FLOATS + INTS, **LOOSE),
    OpCase("matmul_1d_1d", torch.matmul, [[(4,), (4,)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_2d_1d", torch.matmul, [[(3, 4), (4,)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_1d_2d", torch.matmul, [[(4,), (4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_2d_2d", torch.matmul, [[(3, 4), (4, 5)]], FLOATS + INTS, grad=True, **LOOSE),
    OpCase("matmul_3d_2d", torch.matmul, [[(2, 3, 4), (4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_2d_3d", torch.matmul, [[(3, 4), (2, 4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_3d_3d", torch.matmul, [[(2, 3, 4), (2, 4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_1d_3d", torch.matmul, [[(4,), (2, 4, 5)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_3d_1d", torch.matmul, [[(2, 3, 4), (4,)]], FLOATS, grad=True, **LOOSE),
    OpCase("matmul_4d_bcast", torch.matmul, [[(2, 1, 3, 4), (3, 4, 5)], [(2, 3, 3, 4), (2, 3, 4, 5)]], FLOATS,
           grad=True, **LOOSE),
    OpCase("linear", F.linear, [[(3, 4), (5, 4), (5,)], [(2, 3, 4), (5, 4), (5,)]], FLOATS, grad=True, **LOOSE),
    OpCase("linear_nobias", F.linear, [[(3, 4), (5, 4)], [(2, 3, 4), (5, 4)], [(4,), (5, 4)]], FLOATS, grad=True,
           **LOOSE),
    OpCase("mm_out_dtype", out_float32(torch.mm), [[(3, 40), (40, 5)]], (torch.bfloat16, torch.float16),
           rtol=1e-5, atol=1e-5),
    OpCase("bmm_out_dtype", out_float32(torch.bmm), [[(2, 3, 40), (2, 40, 5)]], (torch.bfloat16, torch.float16),
           rtol=1e-5, atol=1e-5),
    OpCase("addmm_out_dtype", out_float32(torch.addmm), [[(3, 5), (3, 40), (40, 5)]],
           (torch.bfloat16, torch.float16), rtol=1e-5, atol=1e-5),
    OpCase("bf16_long_dot", torch.mm, [[(2, 512), (512, 3)]], (torch.bfloat16, torch.float16), low=0, high=1,
           rtol=1e-2, atol=1e-1),
    # softmax family
    OpCase("softmax", lambda a: a.softmax(-1), [[(3, 4)], [(2, 3, 4)], [()], [(0, 3)]], FLOATS, grad=True),
    OpCase("softmax_dim0", lambda a: a.softmax(0), [[(3, 4)]], FLOATS, grad=True),
    OpCase("log_softmax", lambda a: a.log_softmax(1), [[(3, 4)], [(2, 3, 4)]], FLOAT + (torch.bfloat16,), grad=True),
    # f16 results differ from the CPU's by an ulp or two (exp/log implementations).
    OpCase("log_softmax_f16", lambda a: a.log_softmax(1), [[(3, 4)], [(2, 3, 4)]], (torch.float16,), grad=True,
           rtol=4e-3, atol=1e-3),
    OpCase("log_softmax_0d", lambda a: a.log_softmax(0), [[()]], FLOATS, grad=True),
    OpCase("softmax_half_to_float", lambda a: a.softmax(1, dtype=torch.float32), [[(3, 4)]],
           (torch.float16, torch.bfloat16), grad=True),
    OpCase("softmax_large", lambda a: (a * 100).softmax(-1), [[(4, 9)]], FLOATS),
    OpCase("softmax_neginf", lambda a: a.masked_fill(a > 1, float("-inf")).softmax(-1), [[(4, 9)]], FLOATS,
           grad=True),
]


@parametrize(CASES)
def test_matmul(case, shapes, dtype):
    run_case(case, shapes, dtype)


@pytest.mark.parametrize("fn,shapes", [
    (torch.mm, [(3, 4), (5, 6)]), (torch.bmm, [(2, 3, 4), (3, 4, 5)]), (torch.matmul, [(3, 4), (5,)]),
    (torch.dot, [(3,), (4,)]), (torch.mv, [(3, 4), (3,)]), (torch.mm, [(3,), (3, 4)]),
])
def test_bad_shapes_raise(fn, shapes):
    same_error(fn, *[torch.randn(s) for s in shapes])


def test_mixed_dtypes_raise():
    same_error(torch.mm, torch.randn(3, 4), torch.randn(4, 5, dtype=torch.float64))
