"""complex64 / complex128 on tpu against the CPU: storage and copies, printing,
views (view_as_real / view_as_complex alias the storage), lazy conjugates,
elementwise math, reductions, matmuls, in-place ops, empty tensors and errors.

Runs with TORCH_TPU_FALLBACK=error (tests/conftest.py): nothing falls back."""
import warnings

import pytest
import torch

import torch_tpu

CDTYPES = (torch.complex64, torch.complex128)
TOL = {torch.complex64: (1e-5, 1e-5), torch.complex128: (1e-10, 1e-10),
       torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10)}


def crandn(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype)


def close(actual, expected, rtol=None, atol=None):
    if isinstance(expected, (tuple, list)):
        for a, e in zip(actual, expected):
            close(a, e, rtol, atol)
        return
    assert actual.device.type == "tpu", actual.device
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    r, a = TOL.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual, expected, rtol=rtol if rtol is not None else r,
                               atol=atol if atol is not None else a, equal_nan=True)


def check(fn, *xs, rtol=None, atol=None):
    """fn on (copies of) CPU tensors and on their tpu copies gives the same result."""
    expected = fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs])
    actual = fn(*[x.to("tpu") if isinstance(x, torch.Tensor) else x for x in xs])
    close(actual, expected, rtol, atol)


SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4)]


# ---- storage, copies, printing, views ---------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip(dtype, shape):
    x = crandn(*shape, dtype=dtype)
    y = x.to("tpu")
    assert y.dtype == dtype and y.shape == x.shape and y.is_complex()
    assert torch.equal(y.cpu(), x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_casts(dtype):
    x = crandn(3, 4, dtype=dtype)
    check(lambda t: t.to(torch.complex128 if dtype == torch.complex64 else torch.complex64), x)
    r = torch.randn(3, 4)
    check(lambda t: t.to(dtype), r)
    check(lambda t: t.to(dtype), torch.arange(6).reshape(2, 3))
    check(lambda t: t.to(dtype), torch.tensor([True, False]))
    check(lambda t: t.to(torch.bool), torch.tensor([0, 1j, 2, 0], dtype=dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns (once) that the imaginary part is dropped
        check(lambda t: t.to(torch.float32), x)


def test_printing():
    x = torch.tensor([[1 + 2j, -0.5j], [3.25, float("nan") + 1j]])
    assert str(x.to("tpu")).replace(", device='tpu:0'", "") == str(x)
    big = crandn(40, 40, dtype=torch.complex128)
    assert str(big.to("tpu")).replace(", device='tpu:0'", "") == str(big)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_views(dtype):
    x = crandn(4, 6, dtype=dtype)
    check(lambda t: t.t(), x)
    check(lambda t: t[1:, ::2], x)
    check(lambda t: t.t().contiguous(), x)
    check(lambda t: t[:, 1:5].reshape(2, 2, 4), x)
    check(lambda t: t.unsqueeze(0).expand(3, 4, 6).clone(), x)
    check(lambda t: t[2], x)


# ---- view_as_real / view_as_complex / real / imag: aliases ---------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
def test_view_as_real_aliases(dtype):
    for t in (crandn(3, 4, dtype=dtype), crandn(3, 4, dtype=dtype).to("tpu")):
        r = torch.view_as_real(t)
        assert r.shape == (3, 4, 2) and r.dtype == t.real.dtype
        assert r.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    x = crandn(3, 4, dtype=dtype)
    check(torch.view_as_real, x)
    check(lambda t: torch.view_as_real(t[1:, ::2]), x)
    check(lambda t: torch.view_as_real(t.t()), x)

    def write_through(t):
        r = torch.view_as_real(t)
        r[0, 1, 0] = 7.0
        r[:, :, 1].mul_(-2)
        r[2] += 1
        return t

    check(write_through, x)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_view_as_complex_aliases(dtype):
    x = torch.randn(3, 4, 2, dtype=dtype)
    check(torch.view_as_complex, x)
    check(lambda t: torch.view_as_complex(t[1:]), x)

    def write_through(t):
        z = torch.view_as_complex(t)
        z.mul_(1j)
        z[0, 0] = 3 - 4j
        return t

    check(write_through, x)

    def real_sees(t):
        z = torch.view_as_complex(t)
        t[..., 1] = 0.5
        return z.clone()

    check(real_sees, x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_real_imag(dtype):
    x = crandn(3, 5, dtype=dtype)
    check(torch.real, x)
    check(torch.imag, x)
    check(lambda t: t.t().imag, x)
    check(lambda t: t.conj().imag, x)

    def assign(t):
        t.real.mul_(3)
        t.imag[1] = -1
        t.imag.add_(t.real)
        return t

    check(assign, x)


def test_view_as_complex_bad_input_same_error():
    for bad in (lambda d: torch.ones(3, 3, device=d),           # last dim is not 2
                lambda d: torch.ones(2, 2, device=d).t(),        # last dim not of stride 1
                lambda d: torch.ones(3, 2, dtype=torch.int32, device=d)):
        with pytest.raises(RuntimeError) as cpu_err:
            torch.view_as_complex(bad("cpu"))
        with pytest.raises(RuntimeError) as tpu_err:
            torch.view_as_complex(bad("tpu"))
        assert str(tpu_err.value) == str(cpu_err.value)
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex tensors"):
        torch.view_as_real(torch.randn(3, device="tpu"))


# ---- lazy conjugate and negative bits ---------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
def test_conj(dtype):
    x = crandn(3, 4, dtype=dtype)
    y = crandn(4, 2, dtype=dtype, seed=1)
    assert x.to("tpu").conj().is_conj()
    check(lambda t: t.conj(), x)
    check(lambda t: t.conj().resolve_conj(), x)
    check(torch.conj_physical, x)
    check(lambda t: t.conj().clone(), x)
    check(lambda t: t.conj() + 1, x)
    check(lambda t, u: t.conj() @ u, x, y)                  # mm reads the bit itself
    check(lambda t, u: t @ u.conj(), x, y)
    check(lambda t: t.conj().imag, x)                        # a negative view
    check(lambda t: t.conj().imag.clone(), x)
    check(lambda t: torch.vdot(t[0], t[1]), x)
    check(lambda t: torch.dot(t[0].conj(), t[1]), x)

    def into_conj(t):
        v = t.conj()
        v.copy_(torch.ones_like(t) * (1 + 2j))
        return t

    check(into_conj, x)

    def inplace_physical(t):
        return t.conj_physical_()

    check(inplace_physical, x)
    # Copies to and from the CPU resolve the bit.
    assert torch.equal(x.to("tpu").conj().cpu(), x.conj().resolve_conj())
    t = torch.zeros(3, 4, dtype=dtype, device="tpu")
    t.conj().copy_(x)
    assert torch.equal(t.cpu(), x.conj())


# ---- elementwise ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "eq", "ne"])
def test_binary(dtype, op):
    f = getattr(torch, op)
    x = crandn(3, 4, dtype=dtype)
    y = crandn(3, 4, dtype=dtype, seed=1)
    y[0, 0] = x[0, 0]
    check(f, x, y)
    check(f, x, y[1])                                  # broadcasting
    check(f, x, torch.randn(4))                        # with a real tensor
    check(lambda t: f(t, 2.5 - 1j), x)                 # a Python complex
    check(lambda t: f(t, 3), x)
    check(lambda t, u: f(t.t(), u.t()), x, y)          # non-contiguous
    check(lambda t, u: f(t, u), torch.randn(3, 4), y)  # real tensor, complex tensor


@pytest.mark.parametrize("dtype", CDTYPES)
def test_shape_and_indexing_ops(dtype):
    x = crandn(3, 4, dtype=dtype)
    y = crandn(3, 4, dtype=dtype, seed=1)
    idx = torch.tensor([2, 0])
    check(lambda t, u: torch.cat([t, u]), x, y)
    check(lambda t, u: torch.stack([t, u], 1), x, y)
    check(lambda t, u: torch.where(t.real > 0, t, u), x, y)
    check(lambda t: t[idx.to(t.device)], x)
    check(lambda t: t.flip(0).roll(1, 1), x)
    check(lambda t: torch.nn.functional.pad(t, (1, 2)), x)
    check(lambda t: t.masked_fill(t.imag > 0, 2j), x)
    check(lambda t: t.cumsum(1), x, rtol=1e-5, atol=1e-5)
    check(lambda t, u: t ** u, x, y, rtol=1e-4, atol=1e-5)
    check(lambda t: t ** 2, x, rtol=1e-5, atol=1e-5)
    check(lambda t, u: torch.einsum("ij,kj->ik", t, u), x, y, rtol=1e-5, atol=1e-5)


def test_promotion():
    f32 = torch.randn(3)
    check(lambda t: t * 1j, f32)
    check(lambda t: t.double() * 1j, f32)
    check(lambda t: torch.arange(3, device=t.device) + 2j, f32)
    check(lambda t, u: t + u, crandn(3), torch.randn(3, dtype=torch.float64))
    check(lambda t, u: t + u, crandn(3), torch.tensor(2.0, dtype=torch.float64))
    check(lambda t, u: t + u, crandn(3, dtype=torch.complex128), torch.randn(3))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_unary(dtype):
    x = crandn(4, 5, dtype=dtype)
    rt = (1e-4, 1e-5) if dtype == torch.complex64 else (1e-9, 1e-10)
    for f in (torch.neg, torch.abs, torch.angle, torch.exp, torch.log, torch.sqrt, torch.sin, torch.cos,
              torch.tanh, torch.sgn, torch.reciprocal, torch.sigmoid, torch.rsqrt, torch.log1p, torch.expm1,
              torch.isnan, torch.isinf, torch.isfinite, torch.sinh, torch.cosh, torch.tan):
        check(f, x, rtol=rt[0], atol=rt[1])
    check(torch.sgn, torch.tensor([0j, 3 + 4j], dtype=dtype))
    check(torch.isnan, torch.tensor([complex(float("nan"), 0), complex(0, float("nan")), 1j], dtype=dtype))
    check(torch.isinf, torch.tensor([complex(float("inf"), 0), complex(0, float("-inf")), 1j], dtype=dtype))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_complex_and_polar(dtype):
    re, im = torch.randn(3, 4, dtype=dtype), torch.randn(4, dtype=dtype)
    check(torch.complex, re, im)
    check(torch.polar, re.abs(), im)
    check(lambda a, b: torch.complex(a.t(), b.t()), re, torch.randn(3, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_inplace(dtype):
    x = crandn(3, 4, dtype=dtype)
    y = crandn(3, 4, dtype=dtype, seed=1)
    check(lambda t, u: t.mul_(u), x, y)
    check(lambda t, u: t.add_(u, alpha=2), x, y)
    check(lambda t: t.add_(1j), x)
    check(lambda t: t.div_(2 - 1j), x)
    check(lambda t, u: t[:, 1:3].sub_(u[:, :2]), x, y)
    check(lambda t, u: t.t().mul_(u.t()), x, y)
    check(lambda t: t.fill_(1 - 2j), x)
    check(lambda t: t.zero_(), x)
    check(lambda t, u: t.copy_(u), x, y)
    check(lambda t, u: t.copy_(u.real), x, y)
    check(lambda t, u: t.lerp_(u, 0.3), x, y)
    check(lambda t, u: torch.lerp(t, u, u), x, y)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_factories(dtype):
    dev = torch.zeros(2, 3, dtype=dtype, device="tpu")
    assert torch.equal(dev.cpu(), torch.zeros(2, 3, dtype=dtype))
    assert torch.equal(torch.ones(2, dtype=dtype, device="tpu").cpu(), torch.ones(2, dtype=dtype))
    assert torch.equal(torch.full((2,), 1 + 1j, dtype=dtype, device="tpu").cpu(), torch.full((2,), 1 + 1j, dtype=dtype))
    e = torch.empty(0, 3, dtype=dtype, device="tpu")
    assert e.cpu().shape == (0, 3)


# ---- reductions and matmuls -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
def test_reductions(dtype):
    x = crandn(3, 4, 5, dtype=dtype)
    for f in (torch.sum, torch.mean, torch.prod):
        check(f, x, rtol=1e-4, atol=1e-5)
        check(lambda t: f(t, 1), x, rtol=1e-4, atol=1e-5)
        check(lambda t: f(t.transpose(0, 2), 0, keepdim=True), x, rtol=1e-4, atol=1e-5)
    check(lambda t: t.sum((0, 2)), x)
    check(torch.sum, torch.zeros(0, 3, dtype=dtype))
    check(lambda t: torch.linalg.vector_norm(t), x, rtol=1e-5, atol=1e-5)
    check(lambda t: t.var(), x, rtol=1e-5, atol=1e-5)
    check(lambda t: t.std(1, correction=0), x, rtol=1e-5, atol=1e-5)
    check(lambda t: torch.var_mean(t, (0, 2)), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_matmul(dtype):
    a, b = crandn(3, 4, dtype=dtype), crandn(4, 5, dtype=dtype, seed=1)
    tol = dict(rtol=1e-5, atol=1e-5)
    check(torch.mm, a, b, **tol)
    check(torch.matmul, a, b[:, 0], **tol)
    check(lambda u, v: u.t().conj() @ u, a, b, **tol)
    ba, bb = crandn(2, 3, 4, dtype=dtype), crandn(2, 4, 5, dtype=dtype, seed=1)
    check(torch.bmm, ba, bb, **tol)
    check(torch.matmul, ba, b, **tol)
    check(lambda u, v: u @ v, a, torch.randn(4, 5, dtype=a.real.dtype).to(dtype), **tol)
    check(torch.mm, torch.zeros(0, 4, dtype=dtype), b)


# ---- autograd ---------------------------------------------------------------------------------


def grads(fn, *xs):
    cpu = [x.detach().clone().requires_grad_() for x in xs]
    dev = [x.detach().to("tpu").requires_grad_() for x in xs]
    fn(*cpu).backward()
    fn(*dev).backward()
    for c, d in zip(cpu, dev):
        close(d.grad, c.grad, rtol=1e-4, atol=1e-5)


def test_gradients():
    z = crandn(3, 4)
    r = torch.randn(3, 4)
    grads(lambda t: (t * t.conj()).real.sum(), z)
    grads(lambda t: t.abs().sum(), z)
    grads(lambda t: torch.view_as_real(t).pow(2).sum(), z)
    grads(lambda t: (t.exp() * 1j).imag.sum(), z)
    grads(lambda a, b: torch.complex(a, b).abs().sum(), r, r.flip(0))
    grads(lambda a, b: torch.polar(a.abs() + 0.1, b).real.sum(), r, r.flip(0))
    grads(lambda a, b: (a @ b).abs().sum(), z, crandn(4, 2, seed=3))
    grads(lambda t: torch.view_as_complex(t).angle().sum(), torch.randn(3, 2))


def test_ran_on_device():
    """Nothing above is allowed to fall back (conftest sets error mode); check
    the counters too."""
    x = crandn(4, 4).to("tpu")
    (x @ x.conj() + 1j).abs().sum().item()
    assert torch_tpu.fallback_ops() == {}


def test_fused_eager():
    """The same ops recorded into one fused cluster."""
    x, y = crandn(3, 4), crandn(4, 3, seed=1)

    def f(t, u):
        r = torch.view_as_real(t)
        r[..., 0] += 1
        return (t @ u).conj() * 2j + torch.fft.fft(t, dim=0).sum() + t.abs().mean()

    expected = f(x.clone(), y)
    with torch_tpu.eager_mode("fused"):
        actual = f(x.to("tpu"), y.to("tpu"))
        close(actual, expected, 1e-5, 1e-5)


COMPILED = [
    ("mul_conj_abs", lambda z: (z * z.conj()).real + z.abs()),
    ("view_as_real", lambda z: torch.view_as_real(z) * 2),
    ("view_as_complex", lambda z: torch.view_as_complex(torch.view_as_real(z) * 3).angle()),
    ("imag_of_conj", lambda z: z.imag + z.conj().imag),
    ("matmul_conj", lambda z: z.conj() @ z.t()),
    ("fft", lambda z: torch.fft.fft2(z).exp().sum()),
    ("python_complex", lambda z: torch.add(z * (2 + 1j), z.real * 1j, alpha=0.5 - 1j)),
]


@pytest.mark.parametrize("name,fn", COMPILED, ids=[c[0] for c in COMPILED])
def test_compiled_graph(name, fn):
    """torch.compile(backend="tpu") makes each graph one program."""
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    z = crandn(3, 4)
    close(torch.compile(fn, backend="tpu")(z.to("tpu")), fn(z), 1e-5, 1e-5)
    stats = torch_tpu.compile_stats()
    assert stats["eager_graphs"] == {} and stats["compiles"] >= 1


def test_compiled_gradient():
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    x = torch.randn(4, 16)

    def loss(t):
        return torch.fft.rfft(t).abs().sum()

    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    loss(xc).backward()
    torch.compile(loss, backend="tpu")(xd).backward()
    close(xd.grad, xc.grad, 1e-5, 1e-5)
    assert torch_tpu.compile_stats()["eager_graphs"] == {}
