"""torch.fft, torch.stft and torch.istft on tpu against the CPU: every transform,
each norm, 1-D / 2-D / N-D, n= padding and truncation, dims in any order,
non-contiguous inputs, and gradients of real-valued losses.

Runs with TORCH_TPU_FALLBACK=error (tests/conftest.py): nothing falls back."""
import pytest
import torch

import torch_tpu

NORMS = (None, "backward", "ortho", "forward")


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def tol(dtype):
    return (2e-4, 2e-4) if dtype in (torch.float32, torch.complex64) else (1e-9, 1e-9)


def check(fn, x, dtype):
    expected = fn(x)
    actual = fn(x.to("tpu"))
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.shape, expected.shape)
    r, a = tol(dtype)
    torch.testing.assert_close(actual.cpu(), expected, rtol=r, atol=a)


C2C_1D = ["fft", "ifft"]
R2C_1D = ["rfft", "ihfft"]
C2R_1D = ["irfft", "hfft"]


# (input kind, dtype, transform): complex inputs go through every 1-D transform
# that takes them; real inputs through those that take real input.
ONE_D = ([("complex", d, n) for d in (torch.complex64, torch.complex128) for n in C2C_1D + C2R_1D]
         + [("real", d, n) for d in (torch.float32, torch.float64) for n in C2C_1D + R2C_1D])


@pytest.mark.parametrize("kind,dtype,name", ONE_D)
@pytest.mark.parametrize("norm", NORMS)
def test_1d(kind, dtype, name, norm):
    f = getattr(torch.fft, name)
    shape, padded, truncated = ((3, 10), 16, 7) if kind == "complex" else ((4, 9), 12, 5)
    x = rand(shape, dtype)
    check(lambda t: f(t, norm=norm), x, dtype)
    check(lambda t: f(t, n=padded, norm=norm), x, dtype)
    check(lambda t: f(t, n=truncated, norm=norm), x, dtype)
    check(lambda t: f(t, dim=0, norm=norm), x, dtype)
    if kind == "complex":
        check(lambda t: f(t.t(), dim=0, norm=norm), x, dtype)  # non-contiguous
        check(lambda t: f(t[0], norm=norm), x, dtype)
    else:
        check(lambda t: f(t[:, ::2], norm=norm), x, dtype)  # non-contiguous


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn", "irfft2", "irfftn",
                                  "hfft2", "hfftn", "ihfft2", "ihfftn"])
def test_nd(name, norm):
    f = getattr(torch.fft, name)
    real_in = name.startswith(("rfft", "ihfft"))
    dtype = torch.float64 if real_in else torch.complex128
    x = rand((3, 4, 6, 5), dtype)
    check(lambda t: f(t, norm=norm), x, dtype)
    check(lambda t: f(t, dim=(0, 2), norm=norm), x, dtype)
    check(lambda t: f(t, s=(5, 8), dim=(-1, 1), norm=norm), x, dtype)
    if name.endswith("n"):
        check(lambda t: f(t, dim=(0, 1, 2, 3), norm=norm), x, dtype)   # 4 dims: two stablehlo.fft
        check(lambda t: f(t, s=(2, 3, 4), norm=norm), x, dtype)


def test_float32_nd():
    x = rand((2, 8, 6), torch.float32)
    check(torch.fft.rfftn, x, torch.float32)
    check(lambda t: torch.fft.irfftn(torch.fft.rfftn(t)), x, torch.float32)
    check(lambda t: torch.fft.fftn(t.to(torch.complex64)), x, torch.complex64)


def test_helpers():
    x = rand((4, 6), torch.float32)
    check(torch.fft.fftshift, x, torch.float32)
    check(lambda t: torch.fft.ifftshift(torch.fft.fft2(t)), x, torch.complex64)
    assert torch.equal(torch.fft.fftfreq(5, device="tpu").cpu(), torch.fft.fftfreq(5))
    assert torch.equal(torch.fft.rfftfreq(8, 0.5, device="tpu").cpu(), torch.fft.rfftfreq(8, 0.5))


def test_empty_batch():
    # The CPU's MKL refuses an empty batch; the result is the empty tensor of
    # the shape and dtype the meta kernels give.
    for f, shape, dtype in ((torch.fft.fft, (0, 8), torch.complex64), (torch.fft.rfft, (0, 8), torch.float32),
                            (torch.fft.irfft, (2, 0, 5), torch.complex64), (torch.fft.fft2, (0, 3, 4), torch.complex128)):
        meta = f(torch.empty(shape, dtype=dtype, device="meta"))
        out = f(torch.empty(shape, dtype=dtype, device="tpu"))
        assert out.shape == meta.shape and out.dtype == meta.dtype and out.cpu().numel() == 0


def test_bad_n_same_error():
    with pytest.raises(RuntimeError) as cpu_err:
        torch.fft.fft(torch.randn(4), n=0)
    with pytest.raises(RuntimeError) as tpu_err:
        torch.fft.fft(torch.randn(4, device="tpu"), n=0)
    assert str(tpu_err.value) == str(cpu_err.value)


# ---- gradients ------------------------------------------------------------------------------


def grads(fn, x):
    c = x.detach().clone().requires_grad_()
    d = x.detach().to("tpu").requires_grad_()
    fn(c).backward()
    fn(d).backward()
    r, a = tol(x.dtype)
    torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=r, atol=a)


@pytest.mark.parametrize("norm", NORMS)
def test_gradients(norm):
    r = rand((3, 8), torch.float64)
    z = rand((3, 8), torch.complex128)
    grads(lambda t: torch.fft.rfft(t, norm=norm).abs().sum(), r)
    grads(lambda t: torch.fft.rfft(t, n=11, norm=norm).abs().sum(), r)
    grads(lambda t: torch.fft.fft(t, norm=norm).abs().sum(), z)
    grads(lambda t: torch.fft.ifft(t, n=5, norm=norm).real.sum(), z)
    grads(lambda t: torch.fft.irfft(t, norm=norm).pow(2).sum(), z)
    grads(lambda t: torch.fft.hfft(t, n=10, norm=norm).pow(2).sum(), z)
    grads(lambda t: torch.fft.ihfft(t, norm=norm).abs().sum(), r)
    grads(lambda t: torch.fft.rfft2(t.reshape(2, 3, 4), norm=norm).abs().sum(), r)
    grads(lambda t: torch.fft.irfftn(t.reshape(2, 3, 4), norm=norm).pow(2).sum(), z)
    grads(lambda t: torch.fft.fftn(t.reshape(2, 3, 4), norm=norm).abs().sum(), z)


def test_gradient_float32():
    grads(lambda t: torch.fft.rfft(t).abs().sum(), rand((4, 16), torch.float32))


# ---- stft / istft ---------------------------------------------------------------------------


@pytest.mark.parametrize("center", (True, False))
@pytest.mark.parametrize("normalized", (False, True))
def test_stft(center, normalized):
    x = rand((2, 200), torch.float64)
    win = torch.hann_window(32, dtype=torch.float64)

    def f(t):
        return torch.stft(t, 32, hop_length=8, window=win.to(t.device), center=center, normalized=normalized,
                          return_complex=True)

    check(f, x, torch.complex128)
    check(lambda t: torch.stft(t, 16, return_complex=True, onesided=False, center=center), x, torch.complex128)
    check(lambda t: torch.stft(t[0], 20, hop_length=5, win_length=12, return_complex=True, center=center),
          x, torch.complex128)


@pytest.mark.parametrize("center", (True, False))
def test_istft_round_trip(center):
    x = rand((2, 160), torch.float64)
    win = torch.hamming_window(32, dtype=torch.float64)  # non-zero at the ends: valid without centering
    spec = torch.stft(x, 32, hop_length=8, window=win, center=center, return_complex=True)

    def f(s):
        return torch.istft(s, 32, hop_length=8, window=win.to(s.device), center=center,
                           length=160 if center else None)

    check(f, spec, torch.float64)


def test_stft_gradient():
    win = torch.hann_window(16)
    grads(lambda t: torch.stft(t, 16, hop_length=4, window=win.to(t.device), return_complex=True).abs().sum(),
          rand((100,), torch.float32))
    spec = torch.stft(rand((80,), torch.float64), 16, hop_length=4, window=win.double(), return_complex=True)
    grads(lambda s: torch.istft(s, 16, hop_length=4, window=win.double().to(s.device)).pow(2).sum(), spec)


def test_no_fallback():
    x = rand((64,), torch.float32).to("tpu")
    torch.fft.irfft(torch.fft.rfft(x)).sum().item()
    assert torch_tpu.fallback_ops() == {}
