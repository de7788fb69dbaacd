"""float8_e4m3fn and float8_e5m2 on tpu: storage, casts in both directions
(PyTorch's rounding and e4m3fn's saturation), views, and _scaled_mm, each
compared with the CPU."""
import pytest
import torch
import torch_tpu  # noqa: F401

F8 = [torch.float8_e4m3fn, torch.float8_e5m2]
SOURCES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32]
SPECIAL = [1e6, 448., 460., 464., 480., -1e6, float("inf"), float("-inf"), float("nan"), 1e-9, 0.0019,
           0.00098, 57344., 61440., -0.0]


def _values(src):
    x = torch.cat([torch.tensor(SPECIAL), torch.randn(200, generator=torch.Generator().manual_seed(0)) * 50])
    if not src.is_floating_point:
        x = x.nan_to_num(0, 1e4, -1e4)
    return x.to(src)


def _same(a, b):
    assert a.dtype == b.dtype
    torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("src", SOURCES)
@pytest.mark.parametrize("f8", F8)
def test_cast_to_float8_and_back(f8, src):
    x = _values(src)
    t = x.to("tpu").to(f8)
    assert t.device.type == "tpu" and t.dtype == f8
    _same(t.cpu(), x.to(f8))
    for back in (torch.float32, torch.bfloat16, torch.float16):
        _same(t.to(back).cpu(), x.to(f8).to(back))


@pytest.mark.parametrize("f8", F8)
def test_storage_views_and_copies(f8):
    c = (torch.randn(6, 8) * 10).to(f8)
    t = c.to("tpu")
    assert torch.equal(t.cpu().view(torch.uint8), c.view(torch.uint8))  # bit-exact round trip
    _same(t[1:4, ::3].cpu(), c[1:4, ::3])
    _same(t.t().contiguous().cpu(), c.t().contiguous())
    _same(torch.cat([t, t[:2]]).cpu(), torch.cat([c, c[:2]]))
    _same(t.clone().cpu(), c)
    u = torch.empty(6, 8, dtype=f8, device="tpu")
    u.copy_(t)
    _same(u.cpu(), c)
    assert torch.equal(t.view(torch.uint8).cpu(), c.view(torch.uint8))
    assert t[:0].numel() == 0


SCALES = [
    (lambda m, n: torch.tensor(0.5), lambda m, n: torch.tensor(2.0)),
    (lambda m, n: torch.rand(m, 1) + 0.5, lambda m, n: torch.rand(1, n) + 0.5),
]


@pytest.mark.parametrize("scales", SCALES, ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("kw", [
    dict(out_dtype=torch.float32),
    dict(out_dtype=torch.bfloat16, bias=True),
    dict(out_dtype=torch.float16),
    dict(out_dtype=torch.float8_e4m3fn, scale_result=True),
    dict(),
], ids=["f32", "bf16-bias", "f16", "f8-scaled", "default"])
def test_scaled_mm(kw, scales):
    g = torch.Generator().manual_seed(1)
    m, k, n = 16, 32, 48
    a = torch.randn(m, k, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, generator=g).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    sa, sb = scales[0](m, n), scales[1](m, n)
    kw = dict(kw)
    if kw.pop("bias", False):
        kw["bias"] = torch.randn(n, generator=g).to(kw["out_dtype"])
    if kw.pop("scale_result", False):
        if sa.numel() != 1:
            pytest.skip("the CPU takes scale_result only with per-tensor scales")
        kw["scale_result"] = torch.tensor(4.0)
    ref = torch._scaled_mm(a, b, sa, sb, **kw)
    dev = {k2: v.to("tpu") if isinstance(v, torch.Tensor) else v for k2, v in kw.items()}
    out = torch._scaled_mm(a.to("tpu"), b.to("tpu"), sa.to("tpu"), sb.to("tpu"), **dev)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    # A float8 result may round the other way where the float32 sums differ
    # in their last bit: one e4m3 step (1/8 relative), on few elements.
    tol = dict(rtol=0.125, atol=2 ** -9) if ref.dtype.itemsize == 1 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(out.cpu().float(), ref.float(), **tol)
    if ref.dtype.itemsize == 1:
        assert (out.cpu().float() != ref.float()).float().mean() < 0.01


def test_float8_cast_inside_a_compiled_graph():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x.to(torch.float8_e4m3fn).to(torch.float32) * 2, backend="tpu")
    x = torch.tensor([1.0, 3.3, 500.0, -1e5, 0.01])
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), x.to(torch.float8_e4m3fn).float() * 2)
    torch._dynamo.reset()
