"""Copies CPU<->tpu and tpu<->tpu across dtypes, layouts and devices."""
import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool]


def sample(dtype, shape=(3, 5)):
    t = torch.arange(torch.Size(shape).numel()).reshape(shape) - 4
    return (t % 2 == 0) if dtype == torch.bool else t.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip(dtype):
    x = sample(dtype)
    assert torch.equal(x.to("tpu").cpu(), x)
    assert x.to("tpu").dtype == dtype


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,), (7, 1, 3)])
def test_empty_and_zero_dim(shape):
    x = torch.randn(shape)
    y = x.to("tpu")
    assert y.shape == x.shape
    assert torch.equal(y.cpu(), x)


def test_zero_dim_item():
    assert torch.tensor(3.5).to("tpu").item() == 3.5
    assert torch.tensor(7).to("tpu").item() == 7
    assert torch.tensor(True).to("tpu").item() is True


@pytest.mark.parametrize("src", DTYPES, ids=str)
@pytest.mark.parametrize("dst", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=str)
def test_dtype_conversion_on_device(src, dst):
    x = sample(src)
    assert torch.equal(x.to("tpu").to(dst).cpu(), x.to(dst))


def test_noncontiguous_both_ways():
    x = torch.randn(4, 6)
    d = x.to("tpu")
    assert torch.equal(d.t().cpu(), x.t())
    assert torch.equal(d[:, ::2].cpu(), x[:, ::2])
    # CPU -> a strided tpu view writes only that view
    d[:, 1::2] = torch.zeros(4, 3)
    x[:, 1::2] = 0
    assert torch.equal(d.cpu(), x)
    # tpu -> a strided CPU view
    c = torch.ones(6, 4)
    c.t().copy_(d)
    assert torch.equal(c.t(), x)


def test_copy_broadcasts_and_converts():
    d = torch.empty(3, 4, device="tpu")
    d.copy_(torch.arange(4))
    assert torch.equal(d.cpu(), torch.arange(4).float().expand(3, 4))


def test_across_devices():
    x = torch.randn(5, 3)
    a = x.to("tpu:0")
    b = a.to("tpu:1")
    assert b.device == torch.device("tpu:1")
    assert torch.equal(b.cpu(), x)
    c = torch.empty(3, 5, device="tpu:1")
    c.copy_(a.t())
    assert torch.equal(c.cpu(), x.t())


def test_non_blocking():
    x = torch.randn(64)
    y = x.to("tpu", non_blocking=True)
    z = y.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(z, x)


def test_complex32_refused_clearly():
    with pytest.raises(TypeError, match="complex|dtype"):
        torch.zeros(2, dtype=torch.complex32).to("tpu")


def test_mixing_devices_raises():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, device="tpu") + torch.ones(2)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, device="tpu:0") + torch.ones(2, device="tpu:1")
