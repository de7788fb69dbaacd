"""Reflection / replication padding and nearest / linear upsampling (1-D to
3-D), bicubic and anti-aliased 2-D upsampling, forward and backward, against
the CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case, same_error

HALF_TOL = dict(rtol=2e-2, atol=2e-2)
up = F.interpolate

CASES = [
    OpCase("reflect_pad1d", lambda x: F.pad(x, (2, 1), mode="reflect"), [[(2, 3, 5)], [(3, 4)]], FLOATS, grad=True),
    OpCase("reflect_pad2d", lambda x: F.pad(x, (1, 2, 3, 0), mode="reflect"), [[(1, 2, 4, 5)], [(2, 4, 3)]], FLOATS,
           grad=True),
    OpCase("reflect_pad3d", lambda x: F.pad(x, (1, 1, 0, 2, 1, 0), mode="reflect"), [[(1, 2, 3, 4, 3)]], FLOAT,
           grad=True),
    OpCase("replicate_pad1d", lambda x: F.pad(x, (3, 0), mode="replicate"), [[(2, 3, 2)]], FLOATS, grad=True),
    OpCase("replicate_pad2d", lambda x: F.pad(x, (2, 2, 1, 3), mode="replicate"), [[(1, 2, 3, 3)]], FLOATS,
           grad=True),
    OpCase("replicate_pad3d", lambda x: F.pad(x, (1, 0, 1, 2, 0, 1), mode="replicate"), [[(1, 1, 2, 3, 2)]], FLOAT,
           grad=True),
    OpCase("reflect_pad_int", lambda x: F.pad(x, (1, 1), mode="reflect"), [[(2, 4)]], (torch.int64,)),
    OpCase("nearest1d", lambda x: up(x, size=7), [[(2, 3, 4)]], FLOATS, grad=True),
    OpCase("nearest2d_x2", lambda x: up(x, scale_factor=2), [[(1, 2, 3, 4)]], FLOATS, grad=True),
    OpCase("nearest2d_size", lambda x: up(x, size=(5, 3)), [[(2, 2, 3, 4)]], FLOATS, grad=True),
    OpCase("nearest2d_scale", lambda x: up(x, scale_factor=(1.7, 0.6)), [[(1, 2, 5, 6)]], FLOAT, grad=True),
    OpCase("nearest2d_uint8", lambda x: up(x, size=(5, 7)), [[(1, 2, 3, 4)]], (torch.uint8,)),
    OpCase("nearest_exact2d", lambda x: up(x, size=(5, 3), mode="nearest-exact"), [[(1, 2, 3, 4)]], FLOAT,
           grad=True),
    OpCase("nearest3d", lambda x: up(x, scale_factor=2), [[(1, 1, 2, 3, 2)]], FLOAT, grad=True),
    OpCase("linear1d", lambda x: up(x, size=9, mode="linear"), [[(2, 3, 4)]], FLOATS, grad=True),
    OpCase("bilinear2d", lambda x: up(x, scale_factor=2, mode="bilinear"), [[(1, 2, 3, 4)]], FLOATS, grad=True),
    OpCase("bilinear2d_align", lambda x: up(x, size=(7, 3), mode="bilinear", align_corners=True),
           [[(2, 2, 4, 5)]], FLOATS, grad=True),
    OpCase("bilinear2d_down", lambda x: up(x, size=(3, 2), mode="bilinear"), [[(1, 2, 7, 5)]], FLOAT, grad=True),
    OpCase("bilinear2d_scale", lambda x: up(x, scale_factor=1.5, mode="bilinear"), [[(1, 1, 4, 4)]], FLOAT,
           grad=True),
    OpCase("bilinear2d_to_one", lambda x: up(x, size=(1, 3), mode="bilinear", align_corners=True), [[(1, 1, 4, 4)]],
           FLOAT, grad=True),
    OpCase("trilinear3d", lambda x: up(x, size=(3, 4, 2), mode="trilinear"), [[(1, 2, 2, 3, 3)]], FLOAT, grad=True),
    OpCase("bicubic2d_x2", lambda x: up(x, scale_factor=2, mode="bicubic"), [[(1, 2, 3, 4)], [(2, 1, 5, 5)]], FLOATS,
           grad=True),
    OpCase("bicubic2d_align", lambda x: up(x, size=(7, 3), mode="bicubic", align_corners=True), [[(2, 2, 4, 5)]],
           FLOATS, grad=True),
    OpCase("bicubic2d_down", lambda x: up(x, size=(3, 2), mode="bicubic"), [[(1, 2, 9, 5)]], FLOAT, grad=True),
    OpCase("bicubic2d_scale", lambda x: up(x, scale_factor=(1.7, 0.6), mode="bicubic"), [[(1, 1, 4, 6)]], FLOAT,
           grad=True),
    OpCase("bicubic2d_to_one", lambda x: up(x, size=(1, 3), mode="bicubic", align_corners=True), [[(1, 1, 4, 4)]],
           FLOAT, grad=True),
    OpCase("bicubic2d_one_pixel", lambda x: up(x, size=(3, 5), mode="bicubic"), [[(1, 2, 1, 1)]], FLOAT, grad=True),
    OpCase("bicubic2d_empty", lambda x: up(x, size=(3, 5), mode="bicubic"), [[(0, 2, 4, 4)]], FLOAT),
    OpCase("bilinear2d_aa_down", lambda x: up(x, size=(3, 5), mode="bilinear", antialias=True), [[(2, 2, 9, 8)]],
           FLOAT + (torch.float64,), grad=True),
    OpCase("bilinear2d_aa_up", lambda x: up(x, size=(7, 9), mode="bilinear", antialias=True), [[(1, 2, 3, 4)]],
           FLOAT, grad=True),
    OpCase("bilinear2d_aa_align", lambda x: up(x, size=(4, 3), mode="bilinear", antialias=True, align_corners=True),
           [[(1, 1, 11, 7)]], FLOAT, grad=True),
    OpCase("bilinear2d_aa_scale", lambda x: up(x, scale_factor=(0.3, 0.7), mode="bilinear", antialias=True),
           [[(1, 1, 13, 10)]], FLOAT, grad=True),
    OpCase("bicubic2d_aa_down", lambda x: up(x, size=(4, 3), mode="bicubic", antialias=True), [[(1, 2, 10, 9)]],
           FLOAT, grad=True),
    OpCase("bicubic2d_aa_up", lambda x: up(x, size=(6, 7), mode="bicubic", antialias=True), [[(1, 1, 3, 4)]],
           FLOAT, grad=True),
    OpCase("bilinear2d_aa_out", lambda x: torch._C._nn._upsample_bilinear2d_aa(x, [3, 2], False), [[(1, 2, 7, 5)]],
           FLOAT, out=lambda x, out: torch._C._nn._upsample_bilinear2d_aa(x, [3, 2], False, out=out)),
    OpCase("bicubic2d_out", lambda x: torch._C._nn.upsample_bicubic2d(x, [5, 3], False), [[(1, 2, 3, 4)]], FLOAT,
           out=lambda x, out: torch._C._nn.upsample_bicubic2d(x, [5, 3], False, out=out)),
]


@parametrize(CASES)
def test_resample(case, shapes, dtype):
    if dtype in (torch.float16, torch.bfloat16):
        case = OpCase(**{**case.__dict__, **HALF_TOL})
    run_case(case, shapes, dtype)


def test_resample_errors_like_cpu():
    same_error(lambda x: F.pad(x, (3, 0), mode="reflect"), torch.randn(1, 2, 3))
    same_error(lambda x: up(x, size=(2, 2), mode="bilinear"), torch.randn(1, 3, 4))
    # The CPU has no half-precision anti-aliasing; tpu declines it the same way.
    same_error(lambda x: up(x, size=(2, 2), mode="bilinear", antialias=True), torch.randn(1, 1, 4, 4).half())
