"""3-D pooling and adaptive max pooling (csrc/lowering/ops/pool3d_adaptive.cpp)
against the CPU: values, indices and gradients."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, OpCase, parametrize, run_case

V5 = [[(2, 3, 5, 6, 4)], [(3, 4, 5, 4)]]  # batched and unbatched 3-D inputs

CASES = [
    OpCase("max_pool3d", lambda x: F.max_pool3d(x, 2), V5, FLOAT, grad=True),
    OpCase("max_pool3d_indices", lambda x: F.max_pool3d(x, (2, 3, 2), stride=1, padding=1, dilation=(1, 1, 2),
                                                        return_indices=True), [[(1, 2, 5, 6, 6)]], FLOAT, grad=True),
    OpCase("max_pool3d_ceil", lambda x: F.max_pool3d(x, 2, ceil_mode=True), [[(1, 2, 5, 5, 3)]], FLOAT, grad=True),
    OpCase("avg_pool3d", lambda x: F.avg_pool3d(x, 2), V5, FLOAT, grad=True),
    OpCase("avg_pool3d_pad", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False,
                                                    ceil_mode=True), [[(1, 2, 5, 6, 4)]], FLOAT, grad=True),
    OpCase("avg_pool3d_divisor", lambda x: F.avg_pool3d(x, 2, divisor_override=3), [[(1, 2, 4, 4, 4)]], FLOAT,
           grad=True),
    OpCase("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)), V5, FLOAT, grad=True),
    OpCase("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3, return_indices=True), [[(2, 3, 7)]], FLOAT,
           grad=True),
    OpCase("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
           [[(2, 3, 7, 5)], [(3, 6, 6)]], FLOAT, grad=True),
    OpCase("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (2, 2, 3), return_indices=True), V5, FLOAT,
           grad=True),
]


@parametrize(CASES)
def test_matches_cpu(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_bad_arguments():
    with pytest.raises(RuntimeError):
        F.max_pool3d(torch.randn(1, 1, 2, 2, 2, device="tpu"), 3)  # window larger than the input
    with pytest.raises(RuntimeError):
        F.avg_pool3d(torch.randn(2, 2, 2, device="tpu"), 2)  # needs 4 or 5 dims
