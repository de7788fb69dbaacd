"""Per-tensor fake quantisation (fake_quantize_per_tensor_affine with float
and tensor qparams, and the cachemask op under it), forward, mask and
gradient, against the CPU."""
import torch

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case, same_error

aten = torch.ops.aten


def spread(shape, dtype, i):
    """Values that land inside and outside the quantisation range, and on
    rounding ties (x / scale = k + 0.5)."""
    g = torch.Generator().manual_seed(i + 2)
    t = torch.randn(shape, generator=g) * 4
    if t.numel() >= 4:
        t.view(-1)[:4] = torch.tensor([0.25, -0.35, 0.05, 6.05])
    return t.to(dtype)


def qparams(x):
    return x.new_tensor([0.2]), x.new_tensor([1], dtype=torch.int32)


CASES = [
    OpCase("cachemask", lambda x: aten.fake_quantize_per_tensor_affine_cachemask(x, 0.1, 3, 0, 60),
           [[(4, 5)], [()], [(0, 3)], [(2, 3, 4)]], FLOATS, make=spread),
    OpCase("cachemask_signed", lambda x: aten.fake_quantize_per_tensor_affine_cachemask(x, 0.05, 0, -128, 127),
           [[(6, 7)]], FLOAT, make=spread),
    OpCase("fake_quantize", lambda x: torch.fake_quantize_per_tensor_affine(x, 0.2, 1, -10, 10), [[(4, 5)], [(7,)]],
           FLOATS, grad=True, make=spread),
    OpCase("fake_quantize_tensor_qparams",
           lambda x: torch.fake_quantize_per_tensor_affine(x, *qparams(x), -10, 10), [[(4, 5)]], FLOAT, grad=True,
           make=spread),
    OpCase("cachemask_tensor_qparams_disabled",
           lambda x: aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
               x, *qparams(x), x.new_tensor([0], dtype=torch.long), 0, 5), [[(3, 4)]], FLOAT, make=spread),
    OpCase("cachemask_tensor_qparams_enabled",
           lambda x: aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
               x, *qparams(x), x.new_tensor([1], dtype=torch.long), 0, 5), [[(3, 4)]], FLOAT, make=spread),
]


@parametrize(CASES)
def test_fake_quantize(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_bad_qparams_raise_like_cpu():
    x = torch.randn(4)
    same_error(lambda t: torch.fake_quantize_per_tensor_affine(t, 0.1, 0, 10, 5), x)
    same_error(lambda t: torch.fake_quantize_per_tensor_affine(t, 0.1, 20, 0, 10), x)
    same_error(lambda t: torch.fake_quantize_per_tensor_affine(t, 0.1, 0, 0, 10), torch.ones(4, dtype=torch.int64))
