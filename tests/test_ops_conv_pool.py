"""conv1d/conv2d (stride, padding, dilation, groups, bias) and 2-D max/avg
pooling, forward and backward, against the CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case

# Loose for half types: XLA and the CPU accumulate in different orders.
HALF_TOL = dict(rtol=2e-2, atol=2e-2)

CASES = [
    OpCase("conv2d", lambda x, w, b: F.conv2d(x, w, b), [[(2, 3, 8, 8), (4, 3, 3, 3), (4,)]], FLOAT, grad=True),
    OpCase("conv2d_stride_pad", lambda x, w: F.conv2d(x, w, stride=2, padding=1),
           [[(1, 2, 7, 9), (3, 2, 3, 2)]], FLOAT, grad=True),
    OpCase("conv2d_dilated", lambda x, w: F.conv2d(x, w, dilation=2, padding=2),
           [[(2, 2, 9, 9), (2, 2, 3, 3)]], FLOAT, grad=True),
    OpCase("conv2d_groups", lambda x, w: F.conv2d(x, w, groups=2, stride=(1, 2)),
           [[(2, 4, 6, 6), (6, 2, 3, 3)]], FLOAT, grad=True),
    OpCase("conv2d_depthwise", lambda x, w: F.conv2d(x, w, groups=4, padding=1),
           [[(1, 4, 5, 5), (4, 1, 3, 3)]], FLOAT, grad=True),
    OpCase("conv2d_half", lambda x, w: F.conv2d(x, w, padding=1), [[(1, 3, 6, 6), (2, 3, 3, 3)]],
           FLOATS[1:], grad=True, **HALF_TOL),
    OpCase("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [[(2, 3, 10), (5, 3, 3), (5,)]],
           FLOAT, grad=True),
    OpCase("conv1d_groups_dilation", lambda x, w: F.conv1d(x, w, groups=3, dilation=3),
           [[(1, 6, 12), (3, 2, 2)]], FLOAT, grad=True),
    OpCase("max_pool2d", lambda x: F.max_pool2d(x, 2), [[(2, 3, 8, 8)], [(3, 7, 7)]], FLOAT, grad=True),
    OpCase("max_pool2d_stride_pad", lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
           [[(1, 2, 9, 8)]], FLOAT, grad=True),
    OpCase("max_pool2d_ceil_dilation", lambda x: F.max_pool2d(x, 2, stride=2, ceil_mode=True, dilation=1),
           [[(1, 2, 7, 7)]], FLOAT, grad=True),
    OpCase("max_pool2d_indices", lambda x: F.max_pool2d(x, 2, return_indices=True)[1], [[(1, 2, 6, 6)]], FLOAT),
    OpCase("avg_pool2d", lambda x: F.avg_pool2d(x, 2), [[(2, 3, 8, 8)]], FLOAT, grad=True),
    OpCase("avg_pool2d_pad_exclude", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
           [[(1, 2, 9, 7)]], FLOAT, grad=True),
    OpCase("avg_pool2d_pad_include_ceil", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
           [[(1, 2, 8, 8)]], FLOAT, grad=True),
    OpCase("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b), [[(2, 3, 5, 5), (3, 4, 3, 3), (4,)]],
           FLOAT, grad=True),
    OpCase("conv_transpose2d_stride_pad_outpad",
           lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
           [[(1, 2, 4, 5), (2, 3, 3, 2)]], FLOAT, grad=True),
    OpCase("conv_transpose2d_groups_dilation", lambda x, w: F.conv_transpose2d(x, w, groups=2, dilation=2, stride=(1, 2)),
           [[(2, 4, 4, 4), (4, 3, 2, 3)]], FLOAT, grad=True),
    OpCase("conv_transpose1d", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=2),
           [[(2, 3, 6), (3, 2, 4), (2,)]], FLOAT, grad=True),
    OpCase("conv_transpose2d_half", lambda x, w: F.conv_transpose2d(x, w, stride=2),
           [[(1, 2, 3, 3), (2, 2, 3, 3)]], FLOATS[1:], grad=True, **HALF_TOL),
    OpCase("conv3d", lambda x, w: F.conv3d(x, w, padding=1, stride=(1, 2, 1)), [[(1, 2, 4, 5, 4), (3, 2, 3, 3, 2)]],
           FLOAT, grad=True),
    OpCase("conv2d_empty_batch", lambda x, w: F.conv2d(x, w), [[(0, 3, 5, 5), (2, 3, 3, 3)]], FLOAT),
    OpCase("max_pool2d_half", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [[(2, 3, 7, 6)]], FLOATS[1:],
           grad=True),
    OpCase("max_pool2d_dilation", lambda x: F.max_pool2d(x, 2, stride=1, dilation=2), [[(1, 2, 7, 6)]], FLOAT,
           grad=True),
    OpCase("max_pool2d_int", lambda x: F.max_pool2d(x, 2), [[(1, 2, 4, 4)]], (torch.int64,)),
    OpCase("max_pool2d_overlap_ties", lambda x: F.max_pool2d(x.round(), 3, stride=1), [[(1, 1, 6, 6)]], FLOAT,
           grad=True),
    OpCase("avg_pool2d_half", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), [[(2, 3, 7, 6)]], FLOATS[1:],
           grad=True),
    OpCase("avg_pool2d_ceil_exclude", lambda x: F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False),
           [[(1, 2, 5, 7)]], FLOAT, grad=True),
    OpCase("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [[(2, 3, 7, 9)], [(3, 6, 8)]],
           FLOATS, grad=True),
    OpCase("adaptive_avg_pool2d_upsample", lambda x: F.adaptive_avg_pool2d(x, (5, 2)), [[(1, 2, 3, 2)]], FLOAT,
           grad=True),
    OpCase("adaptive_avg_pool2d_none", lambda x: F.adaptive_avg_pool2d(x, (None, 2)), [[(1, 2, 3, 5)]], FLOAT,
           grad=True),
    OpCase("adaptive_avg_pool2d_global", lambda x: F.adaptive_avg_pool2d(x, 1), [[(2, 3, 5, 5)]], FLOATS,
           grad=True),
    OpCase("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=3), [[(1, 1, 4, 6)]], FLOAT,
           grad=True),
]


@parametrize(CASES)
def test_conv_pool(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_pool_errors_like_cpu():
    from optest import same_error
    same_error(lambda x: F.max_pool2d(x, 3, padding=2), torch.randn(1, 1, 5, 5))
    same_error(lambda x: F.avg_pool2d(x, 6), torch.randn(1, 1, 5, 5))
    same_error(lambda x: F.adaptive_avg_pool2d(x, (2, 2)), torch.randn(1, 1, 0, 5))
    same_error(lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2), torch.randn(1, 2, 3, 3),
               torch.randn(2, 2, 3, 3))


def test_conv_shape_error_like_cpu():
    x, w = torch.randn(1, 3, 5, 5), torch.randn(2, 4, 3, 3)
    with pytest.raises(RuntimeError):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError):
        F.conv2d(x.to("tpu"), w.to("tpu"))


def test_small_convnet_trains_like_cpu():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(4, 8, 3), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(8, 3))
    x, y = torch.randn(8, 1, 10, 10), torch.randint(0, 3, (8,))
    losses = {}
    for dev in ("cpu", "tpu"):
        m = __import__("copy").deepcopy(net).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        ls = []
        for _ in range(5):
            opt.zero_grad()
            loss = F.cross_entropy(m(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
            ls.append(loss.item())
        losses[dev] = ls
    torch.testing.assert_close(torch.tensor(losses["tpu"]), torch.tensor(losses["cpu"]), rtol=1e-4, atol=1e-5)
