"""Weight normalisation (_weight_norm_interface forward as PyTorch's
decomposition, its backward as a rule) and embedding_renorm_ (what
F.embedding(max_norm=...) calls), against the CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case

HALF_TOL = dict(rtol=2e-2, atol=2e-2)


def randn(shape, dtype, i):
    return torch.randn(shape, generator=torch.Generator().manual_seed(i + 5)).to(dtype)


def table_and_indices(rows):
    """Input 0: an embedding table (rows of norm about 1-4); input 1: row
    indices with repeats."""
    def make(shape, dtype, i):
        g = torch.Generator().manual_seed(i + 1)
        if i == 1:
            return torch.randint(0, rows, shape, generator=g)
        return (torch.randn(shape, generator=g) * 1.5).to(dtype)
    return make


def renorm(max_norm, p):
    return lambda w, i: torch.embedding_renorm_(w, i, max_norm, p)


CASES = [
    OpCase("weight_norm_dim0", lambda v, g: torch._weight_norm(v, g, 0), [[(4, 3, 5), (4, 1, 1)], [(6, 2), (6, 1)]],
           FLOATS, grad=True, make=randn),
    OpCase("weight_norm_last_dim", lambda v, g: torch._weight_norm(v, g, -1), [[(4, 3, 5), (1, 1, 5)]], FLOATS,
           grad=True, make=randn),
    OpCase("weight_norm_interface", lambda v, g: torch._weight_norm_interface(v, g, 0), [[(5, 7), (5, 1)]], FLOAT,
           grad=True, make=randn),
    OpCase("weight_norm_interface_last", lambda v, g: torch._weight_norm_interface(v, g, 1), [[(5, 7), (1, 7)]], FLOAT,
           make=randn),
    OpCase("weight_norm_module", lambda x, w: F.linear(x, torch._weight_norm(w, w.norm(dim=1, keepdim=True), 0)),
           [[(3, 6), (4, 6)]], FLOAT, grad=True, make=randn),
    OpCase("embedding_renorm_l2", lambda w, i: renorm(1.0, 2.0)(w.clone(), i), [[(10, 4), (3, 2)], [(6, 3), (0,)]],
           FLOATS, inplace=renorm(1.0, 2.0), make=table_and_indices(6)),
    OpCase("embedding_renorm_l1", lambda w, i: renorm(2.5, 1.0)(w.clone(), i), [[(10, 4), (7,)]], FLOAT,
           inplace=renorm(2.5, 1.0), make=table_and_indices(10)),
    OpCase("embedding_renorm_inf", lambda w, i: renorm(1.0, float("inf"))(w.clone(), i), [[(10, 4), (7,)]], FLOAT,
           inplace=renorm(1.0, float("inf")), make=table_and_indices(10)),
    OpCase("embedding_renorm_p3", lambda w, i: renorm(1.5, 3.0)(w.clone(), i), [[(10, 4), (7,)]], FLOAT,
           make=table_and_indices(10)),
    OpCase("embedding_max_norm", lambda w, i: F.embedding(i, w, max_norm=1.0), [[(10, 4), (2, 3)]], FLOAT,
           make=table_and_indices(10), noncontiguous=False),
]


@parametrize(CASES)
def test_op(case, shapes, dtype):
    if dtype in (torch.float16, torch.bfloat16):
        case = OpCase(**{**case.__dict__, **HALF_TOL})
    run_case(case, shapes, dtype)


def test_embedding_max_norm_renormalises_the_table_in_place():
    w = torch.randn(8, 3) * 2
    idx = torch.tensor([[1, 5, 5], [0, 1, 7]])
    wt = w.to("tpu")
    expected = F.embedding(idx, w, max_norm=1.0)
    torch.testing.assert_close(F.embedding(idx.to("tpu"), wt, max_norm=1.0).cpu(), expected)
    torch.testing.assert_close(wt.cpu(), w)  # the CPU call renormalised `w` in place too


def test_bad_input():
    for w, i in [(torch.randn(6), torch.tensor([1])), (torch.randn(6, 2), torch.tensor([1.0]))]:
        with pytest.raises(RuntimeError):
            torch.embedding_renorm_(w, i, 1.0, 2.0)
        with pytest.raises(RuntimeError):
            torch.embedding_renorm_(w.to("tpu"), i.to("tpu"), 1.0, 2.0)
