"""im2col (F.unfold), col2im (F.fold), pdist and nonzero_static against the CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, INTS, OpCase, parametrize, run_case


def sparse(shape, dtype, i):
    g = torch.Generator().manual_seed(i)
    return (torch.randn(shape, generator=g) * (torch.rand(shape, generator=g) > 0.6)).to(dtype)


CASES = [
    OpCase("unfold", lambda x: F.unfold(x, 2), [[(2, 3, 4, 5)], [(3, 4, 4)]], FLOATS, grad=True),
    OpCase("unfold_geometry", lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
           [[(1, 2, 7, 6)]], FLOAT, grad=True),
    OpCase("unfold_empty_batch", lambda x: F.unfold(x, 2), [[(0, 2, 3, 3)]], FLOAT),
    OpCase("fold", lambda x: F.fold(x, (4, 5), 2), [[(2, 12, 12)], [(12, 12)]], FLOATS, grad=True),
    OpCase("fold_geometry", lambda x: F.fold(x, (7, 6), (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
           [[(1, 12, 12)]], FLOAT, grad=True),
    OpCase("pdist", F.pdist, [[(5, 3)], [(2, 4)], [(1, 3)]], FLOAT, rtol=1e-5, atol=1e-5),
    *[OpCase(f"pdist_p{p}", lambda x, p=p: F.pdist(x, p), [[(6, 4)]], FLOAT, rtol=1e-5, atol=1e-5)
      for p in (0, 1, 1.5, float("inf"))],
    OpCase("nonzero_static_pad", lambda x: torch.nonzero_static(x, size=20), [[(3, 4)], [(2, 3, 2)]],
           FLOAT + INTS + (torch.bool,), make=sparse),
    OpCase("nonzero_static_truncate", lambda x: torch.nonzero_static(x, size=2, fill_value=-7), [[(10,)], [(0,)]],
           FLOAT, make=sparse),
    OpCase("nonzero_static_0d", lambda x: torch.nonzero_static(x, size=3), [[()]], FLOAT, make=sparse),
]


@parametrize(CASES)
def test_matches_cpu(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_bad_arguments():
    with pytest.raises(RuntimeError):
        F.pdist(torch.randn(4, 3, device="tpu"), -1.0)
    with pytest.raises(RuntimeError):
        torch.nonzero_static(torch.ones(3, device="tpu"), size=-1)
    with pytest.raises(RuntimeError):
        F.unfold(torch.randn(1, 1, 2, 2, device="tpu"), 3)  # kernel larger than the input
