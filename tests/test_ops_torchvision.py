"""torchvision's detection ops on tpu against torchvision's CPU kernels.

roi_align, ps_roi_align, roi_pool, ps_roi_pool and deform_conv2d (forward
and backward) and nms have tpu lowering rules
(csrc/lowering/ops/torchvision_*.cpp); conftest makes any CPU fallback an
error, and each test also asserts that none was counted. torchvision loads
only beside torch 2.14's CUDA build, so this file runs in .venv-2.14
(the torch 2.14 step of scripts/test.sh).
"""
import pytest
import torch

import torch_tpu

torchvision = pytest.importorskip(
    "torchvision", reason="torchvision is installed only in the torch 2.14 environment (.venv-2.14)")
from torchvision.ops import deform_conv2d, nms, ps_roi_align, ps_roi_pool, roi_align, roi_pool  # noqa: E402

DEV = "tpu"


@pytest.fixture(autouse=True)
def _native_only():
    yield
    assert torch_tpu.fallback_ops() == {}


def _rois(k, n, h, w, scale, gen, dtype):
    """[K, 5] boxes over an image of h x w (in input pixels / scale): some
    inside, some reaching past the borders, some degenerate."""
    x1 = torch.rand(k, generator=gen) * (w / scale) * 1.2 - 0.1 * w / scale
    y1 = torch.rand(k, generator=gen) * (h / scale) * 1.2 - 0.1 * h / scale
    bw = torch.rand(k, generator=gen) * (w / scale) * 0.8
    bh = torch.rand(k, generator=gen) * (h / scale) * 0.8
    if k > 2:
        bw[0] = 0.0  # a zero-width box
        bh[1] = -1.0  # a reversed box
    batch = torch.randint(0, n, (k,), generator=gen).to(torch.float32)
    return torch.stack([batch, x1, y1, x1 + bw, y1 + bh], 1).to(dtype)


# (N, C, H, W, K, output_size, spatial_scale)
SHAPES = [
    (1, 3, 8, 8, 4, (2, 2), 1.0),
    (2, 5, 12, 9, 7, (3, 4), 0.5),
    (3, 2, 6, 16, 5, (5, 1), 0.25),
]


# Each shape, each flag and each dtype at least once (the full cross product
# costs minutes of compiles for no new path). ps_roi_align has no `aligned`
# flag (None) and takes boxes of positive size only (an empty grid divides by 0).
ROI_ALIGN_CASES = [
    ("roi_align", torch.float32, SHAPES[0], False, 2), ("roi_align", torch.float32, SHAPES[1], True, 0),
    ("roi_align", torch.float32, SHAPES[2], True, 2), ("roi_align", torch.float64, SHAPES[1], False, 2),
    ("roi_align", torch.float64, SHAPES[2], False, 0),
    ("ps_roi_align", torch.float32, SHAPES[0], None, 2), ("ps_roi_align", torch.float32, SHAPES[1], None, 0),
    ("ps_roi_align", torch.float64, SHAPES[1], None, 2),
]


@pytest.mark.parametrize("op,dtype,shape,aligned,sampling_ratio", ROI_ALIGN_CASES,
                         ids=lambda v: "x".join(map(str, v[:5])) if isinstance(v, tuple) else str(v))
def test_roi_align_forward_backward(op, dtype, shape, aligned, sampling_ratio):
    n, c, h, w, k, out, scale = shape
    if op == "ps_roi_align":
        c = 2 * out[0] * out[1]  # two output channels
    gen = torch.Generator().manual_seed(n * 100 + k)
    x = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    rois = _rois(k, n, h, w, scale, gen, dtype)
    align, args = roi_align, (out, scale, sampling_ratio, aligned)
    if op == "ps_roi_align":
        rois, align, args = rois[3:], ps_roi_align, args[:3]
    xc = x.clone().requires_grad_()
    xt = x.to(DEV).requires_grad_()
    ref = align(xc, rois, *args)
    got = align(xt, rois.to(DEV), *args)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(got.cpu(), ref, **tol)
    g = torch.randn(ref.shape, generator=gen, dtype=dtype)
    ref.backward(g)
    got.backward(g.to(DEV))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, **tol)


def test_roi_align_large_roi_adaptive_grid():
    """sampling_ratio <= 0: a box far larger than the pooled size samples
    ceil(roi / pooled) points per bin side, different per box."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 20, 20, generator=gen)
    rois = torch.tensor([[0, 0.0, 0.0, 19.0, 19.0], [0, 2.0, 3.0, 5.0, 4.0], [0, -5.0, -5.0, 30.0, 25.0]])
    ref = roi_align(x, rois, (2, 3), 1.0, -1, False)
    got = roi_align(x.to(DEV), rois.to(DEV), (2, 3), 1.0, -1, False)
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_roi_align_list_of_boxes_and_empty():
    x = torch.randn(2, 3, 7, 7)
    boxes = [torch.tensor([[0.0, 0.0, 4.0, 4.0]]), torch.zeros(0, 4)]
    ref = roi_align(x, boxes, 2, 1.0, 2, True)
    got = roi_align(x.to(DEV), [b.to(DEV) for b in boxes], 2, 1.0, 2, True)
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5)
    empty = roi_align(x.to(DEV), torch.zeros(0, 5, device=DEV), 2, 1.0, 2, True)
    assert empty.shape == (0, 3, 2, 2) and empty.device.type == DEV


def test_roi_align_bad_boxes_raise():
    x = torch.randn(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="K, 5"):
        torch.ops.torchvision.roi_align(x.to(DEV), torch.zeros(2, 4, device=DEV), 1.0, 2, 2, 2, False)
    with pytest.raises(RuntimeError, match="K, 5"):
        torch.ops.torchvision.roi_align(x, torch.zeros(2, 4), 1.0, 2, 2, 2, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])))
@pytest.mark.parametrize("op", ["roi_pool", "ps_roi_pool"])
def test_roi_pool_forward_backward(op, dtype, shape):
    """roi_pool (max, exact, with its argmax) and ps_roi_pool (average over a
    channel per bin: 2 output channels)."""
    n, c, h, w, k, out, scale = shape
    if op == "ps_roi_pool":
        c = 2 * out[0] * out[1]
    gen = torch.Generator().manual_seed(n * 10 + k)
    x = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    rois = _rois(k, n, h, w, scale, gen, dtype)
    pool = roi_pool if op == "roi_pool" else ps_roi_pool
    xc = x.clone().requires_grad_()
    xt = x.to(DEV).requires_grad_()
    ref = pool(xc, rois, out, scale)
    got = pool(xt, rois.to(DEV), out, scale)
    # The max is one input value; the average sums in another order.
    torch.testing.assert_close(got.cpu(), ref, **(dict(rtol=0, atol=0) if op == "roi_pool" else {}))
    _, ref_index = getattr(torch.ops.torchvision, op)(x, rois, scale, *out)  # argmax / channel mapping
    _, got_index = getattr(torch.ops.torchvision, op)(x.to(DEV), rois.to(DEV), scale, *out)
    assert torch.equal(got_index.cpu(), ref_index)
    g = torch.randn(ref.shape, generator=gen, dtype=dtype)
    ref.backward(g)
    got.backward(g.to(DEV))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_roi_pool_bins_on_integer_bounds(dtype):
    """ROI sizes whose bin bounds land on whole pixels (7 rows in 3 bins: a bin
    ends at 3 * (7 / 3)), where a bin size one ulp off moves a bound by a pixel."""
    x = torch.randn(1, 2, 16, 16, generator=torch.Generator().manual_seed(3), dtype=dtype)
    rois = torch.tensor([[0, 0, 0, size - 1, size - 1] for size in range(1, 15)], dtype=dtype)
    for out in [(3, 3), (5, 7), (6, 5)]:
        ref, ref_arg = torch.ops.torchvision.roi_pool(x, rois, 1.0, *out)
        got, got_arg = torch.ops.torchvision.roi_pool(x.to(DEV), rois.to(DEV), 1.0, *out)
        assert torch.equal(got.cpu(), ref) and torch.equal(got_arg.cpu(), ref_arg), out
        xp = torch.randn(1, 2 * out[0] * out[1], 16, 16, dtype=dtype)
        ref_ps, _ = torch.ops.torchvision.ps_roi_pool(xp, rois, 1.0, *out)
        got_ps, _ = torch.ops.torchvision.ps_roi_pool(xp.to(DEV), rois.to(DEV), 1.0, *out)
        torch.testing.assert_close(got_ps.cpu(), ref_ps)


def test_roi_pool_bad_boxes_raise():
    with pytest.raises(RuntimeError, match="K, 5"):
        torch.ops.torchvision.roi_pool(torch.randn(1, 1, 4, 4, device=DEV), torch.zeros(2, 4, device=DEV), 1.0, 2, 2)


def _boxes(k, gen, dtype):
    xy = torch.rand(k, 2, generator=gen) * 50
    wh = torch.rand(k, 2, generator=gen) * 20 + 1
    return torch.cat([xy, xy + wh], 1).to(dtype)


@pytest.mark.parametrize("dtype,k,iou", [(torch.float32, 1, 0.3), (torch.float32, 9, 0.0), (torch.float32, 60, 0.3),
                                         (torch.float32, 60, 0.7), (torch.float64, 9, 0.7)])
def test_nms(dtype, k, iou):
    gen = torch.Generator().manual_seed(k)
    boxes = _boxes(k, gen, dtype)
    scores = torch.rand(k, generator=gen, dtype=dtype)
    ref = nms(boxes, scores, iou)
    got = nms(boxes.to(DEV), scores.to(DEV), iou)
    assert got.device.type == DEV and got.dtype == torch.int64
    assert got.cpu().tolist() == ref.tolist()


def test_nms_empty_and_bad_input():
    got = nms(torch.zeros(0, 4, device=DEV), torch.zeros(0, device=DEV), 0.5)
    assert got.shape == (0,) and got.dtype == torch.int64
    with pytest.raises(RuntimeError, match="4 elements in dimension 1"):
        nms(torch.zeros(3, 5, device=DEV), torch.zeros(3, device=DEV), 0.5)
    with pytest.raises(RuntimeError, match="same number of elements"):
        nms(torch.zeros(3, 4, device=DEV), torch.zeros(2, device=DEV), 0.5)


def test_nms_second_call_compiles_nothing():
    gen = torch.Generator().manual_seed(0)
    boxes, scores = _boxes(20, gen, torch.float32).to(DEV), torch.rand(20, generator=gen).to(DEV)
    nms(boxes, scores, 0.5)
    before = torch_tpu.cache_info()["compiles"]
    nms(boxes, scores, 0.5)
    assert torch_tpu.cache_info()["compiles"] == before


# (N, C, H, W, Cout, kernel, stride, padding, dilation, groups, offset_groups)
DEFORM = [
    (1, 2, 5, 5, 3, (3, 3), 1, 1, 1, 1, 1),
    (2, 4, 6, 7, 4, (2, 3), (2, 1), (0, 1), (1, 2), 2, 2),
]


@pytest.mark.parametrize("dtype,case,use_mask",
                         [(torch.float32, DEFORM[0], True), (torch.float32, DEFORM[1], False),
                          (torch.float64, DEFORM[1], True)],
                         ids=lambda v: "x".join(map(str, v[:5])) if isinstance(v, tuple) else str(v))
def test_deform_conv2d_forward_backward(dtype, case, use_mask):
    n, c, h, w, cout, (kh, kw), stride, padding, dilation, groups, og = case
    pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    ho = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wo = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    gen = torch.Generator().manual_seed(c * 10 + h)
    x = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    weight = torch.randn(cout, c // groups, kh, kw, generator=gen, dtype=dtype)
    offset = torch.randn(n, og * 2 * kh * kw, ho, wo, generator=gen, dtype=dtype) * 2
    mask = torch.rand(n, og * kh * kw, ho, wo, generator=gen, dtype=dtype) if use_mask else None
    bias = torch.randn(cout, generator=gen, dtype=dtype)
    cpu_args = [t.clone().requires_grad_() if t is not None else None for t in (x, offset, weight, bias, mask)]
    tpu_args = [t.to(DEV).requires_grad_() if t is not None else None for t in (x, offset, weight, bias, mask)]
    kw_ = dict(stride=stride, padding=padding, dilation=dilation)
    ref = deform_conv2d(*cpu_args[:4], mask=cpu_args[4], **kw_)
    got = deform_conv2d(*tpu_args[:4], mask=tpu_args[4], **kw_)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got.cpu(), ref, **tol)
    g = torch.randn(ref.shape, generator=gen, dtype=dtype)
    ref.backward(g)
    got.backward(g.to(DEV))
    for name, a, b in zip(("input", "offset", "weight", "bias", "mask"), tpu_args, cpu_args):
        if b is not None:
            torch.testing.assert_close(a.grad.cpu(), b.grad, **tol, msg=lambda m, name=name: f"{name}: {m}")


def test_deform_conv2d_bad_offset_raises():
    x, weight = torch.randn(1, 2, 5, 5, device=DEV), torch.randn(3, 2, 3, 3, device=DEV)
    with pytest.raises(RuntimeError):
        deform_conv2d(x, torch.zeros(1, 5, 3, 3, device=DEV), weight)
