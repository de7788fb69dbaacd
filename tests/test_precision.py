"""torch.tpu.precision / torch.tpu.Precision, torch.backends.tpu.allow_excess_precision
and matmul out_dtype: each setting compiles its own program, and the
programs' results differ where the numerics do."""
import pytest
import torch

import torch_tpu
import torch_tpu.compiler

torch_tpu.compiler.register()  # backend="tpu" (an installed torch_tpu registers it by entry point)

P = torch.tpu.Precision
ONE_PLUS = 1 + 2**-8  # halfway between two bfloat16 values: one bf16 pass rounds it to 1


def misses():
    return torch_tpu.cache_info()["misses"]


def square_diag(m):
    return (m @ m).cpu()[0, 0].item()  # the copy to the host runs no program: only the matmul counts


@pytest.fixture(autouse=True)
def _restore():
    old = torch.get_float32_matmul_precision()
    yield
    torch.tpu.precision(None)
    torch.set_float32_matmul_precision(old)
    torch.backends.tpu.allow_excess_precision = True
    torch.backends.tpu.xla_optimization_level = None


def test_default_follows_pytorch_highest():
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.tpu.get_precision() is P.HIGHEST
    a = torch.eye(64) * ONE_PLUS
    assert square_diag(a.to("tpu")) == square_diag(a) == ONE_PLUS**2  # exact in float32


def test_context_manager_setter_and_errors():
    with torch.tpu.precision(P.DEFAULT) as ctx:
        assert torch.tpu.get_precision() is P.DEFAULT
        with torch.tpu.precision("high"):
            assert torch.tpu.get_precision() is P.HIGH
        assert torch.tpu.get_precision() is P.DEFAULT
    assert isinstance(ctx, torch.tpu.precision)
    assert torch.tpu.get_precision() is P.HIGHEST
    torch.tpu.precision(P.HIGH)  # a plain call sets it
    assert torch.tpu.get_precision() is P.HIGH
    torch.tpu.precision(None)  # back to torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    assert torch.tpu.get_precision() is P.DEFAULT
    with pytest.raises(ValueError, match="expected torch.tpu.Precision"):
        torch.tpu.precision("fast")
    with pytest.raises(ValueError, match="expected torch.tpu.Precision"):
        torch.tpu.precision(3)
    assert torch.tpu.get_precision() is P.DEFAULT


def test_each_precision_is_its_own_program_with_its_own_result():
    a = torch.eye(32) * ONE_PLUS
    ad = a.to("tpu")
    square_diag(ad)
    before = misses()
    with torch.tpu.precision(P.DEFAULT):
        assert square_diag(ad) == 1.0  # operands rounded to bf16: 1 * 1
        assert misses() == before + 1
        square_diag(ad)
        assert misses() == before + 1  # cached
    with torch.tpu.precision(P.HIGH):
        high = square_diag(ad)
        assert misses() == before + 2
    assert high == pytest.approx(ONE_PLUS**2, rel=2**-15)
    with torch.tpu.precision(P.HIGHEST):
        assert square_diag(ad) == ONE_PLUS**2
    assert misses() == before + 2  # HIGHEST is the default's program


def test_default_precision_is_one_bf16_pass_with_f32_accumulation():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 48, generator=g), torch.randn(48, 8, generator=g)
    one_pass = a.bfloat16().float() @ b.bfloat16().float()
    with torch.tpu.precision(P.DEFAULT):
        got = (a.to("tpu") @ b.to("tpu")).cpu()
        lin = torch.nn.functional.linear(a.to("tpu"), b.t().contiguous().to("tpu")).cpu()
    torch.testing.assert_close(got, one_pass, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(lin, one_pass, rtol=1e-6, atol=1e-5)
    assert (got - a @ b).abs().max() > 1e-3  # visibly not float32
    # torch.set_float32_matmul_precision("medium") selects the same numerics.
    torch.set_float32_matmul_precision("medium")
    torch.testing.assert_close((a.to("tpu") @ b.to("tpu")).cpu(), one_pass, rtol=1e-6, atol=1e-5)


def test_convolution_follows_the_precision():
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(2, 3, 9, 9, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    conv = torch.nn.functional.conv2d
    torch.testing.assert_close(conv(x.to("tpu"), w.to("tpu")).cpu(), conv(x, w), rtol=1e-5, atol=1e-5)
    with torch.tpu.precision(P.DEFAULT):
        got = conv(x.to("tpu"), w.to("tpu")).cpu()
    torch.testing.assert_close(got, conv(x.bfloat16().float(), w.bfloat16().float()), rtol=1e-5, atol=1e-5)
    assert (got - conv(x, w)).abs().max() > 1e-3


def test_precision_reaches_fused_and_compiled_programs(fused):
    a = torch.eye(16) * ONE_PLUS
    ad = a.to("tpu")
    with torch.tpu.precision(P.DEFAULT):
        assert ((ad @ ad) + 0)[0, 0].item() == 1.0
    assert ((ad @ ad) + 0)[0, 0].item() == ONE_PLUS**2


def test_precision_reaches_torch_compile():
    f = torch.compile(lambda x: x @ x, backend="tpu")
    ad = (torch.eye(16) * ONE_PLUS).to("tpu")
    assert f(ad)[0, 0].item() == ONE_PLUS**2
    with torch.tpu.precision(P.DEFAULT):
        assert f(ad)[0, 0].item() == 1.0
    assert f(ad)[0, 0].item() == ONE_PLUS**2


def test_backward_uses_the_forward_setting():
    w = (torch.eye(8) * ONE_PLUS).to("tpu").requires_grad_()
    x = (torch.eye(8) * ONE_PLUS).to("tpu")
    with torch.tpu.precision(P.DEFAULT):
        (x @ w).sum().backward()  # grad w = x^T @ ones: bf16 pass of x
    assert w.grad[0, 0].item() == 1.0


def mul_add(a, b, c):
    return a @ b * c


def excess_precision_inputs():
    eye = torch.eye(64, dtype=torch.bfloat16, device="tpu")
    # bf16 values 1+2^-6 and 1+2^-7; their product needs bit 13, which bf16 lacks.
    return eye * (1 + 2**-6), eye * (1 + 2**-7), torch.ones(1, device="tpu")


def test_backends_tpu_module():
    import sys

    assert hasattr(torch.backends, "tpu") and sys.modules["torch.backends.tpu"] is torch.backends.tpu
    assert torch.backends.tpu.allow_excess_precision is True  # XLA's default
    assert torch.backends.tpu.is_available()
    with pytest.raises(TypeError, match="must be a bool"):
        torch.backends.tpu.allow_excess_precision = 1
    assert torch.backends.tpu.allow_excess_precision is True


def test_allow_excess_precision_compiles_its_own_programs():
    """False keeps every rounding the program states (PyTorch's numerics); XLA's
    CPU plugin keeps them under True as well for these programs, so the results
    agree here and the change shows in the caches and in the options XLA gets
    (tests/test_program_dump.py reads them from XLA's dump)."""
    a, b, c = excess_precision_inputs()
    rounded = 1 + 2**-6 + 2**-7  # a @ b is a bf16 tensor: its product is rounded before * c
    assert mul_add(a, b, c)[0, 0].item() == rounded
    f = torch.compile(mul_add, backend="tpu")
    f(a, b, c).cpu()
    before = misses()
    torch.backends.tpu.allow_excess_precision = False
    assert f(a, b, c).cpu()[0, 0].item() == rounded
    graph_misses = misses() - before
    assert graph_misses >= 1  # its own program
    assert mul_add(a, b, c).cpu()[0, 0].item() == rounded
    assert misses() > before + graph_misses  # and its own eager programs
    torch.backends.tpu.allow_excess_precision = True
    n = misses()
    f(a, b, c).cpu()
    assert misses() == n  # the first program, still cached


def test_allow_excess_precision_in_fused_eager(fused):
    a, b, c = excess_precision_inputs()
    torch.backends.tpu.allow_excess_precision = False
    assert mul_add(a, b, c)[0, 0].item() == 1 + 2**-6 + 2**-7


OUT_DTYPE_CASES = [
    ("mm", lambda a, b, **k: torch.mm(a, b, **k), [(3, 40), (40, 5)]),
    ("bmm", lambda a, b, **k: torch.bmm(a, b, **k), [(2, 3, 40), (2, 40, 5)]),
    ("addmm", lambda s, a, b, **k: torch.addmm(s, a, b, beta=0.5, alpha=2, **k), [(3, 5), (3, 40), (40, 5)]),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name,fn,shapes", OUT_DTYPE_CASES, ids=[c[0] for c in OUT_DTYPE_CASES])
def test_out_dtype_float32_keeps_the_accumulator(name, fn, shapes, dtype):
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    got = fn(*[x.to("tpu") for x in xs], out_dtype=torch.float32)
    assert got.dtype == torch.float32
    # The CPU has no out_dtype kernels (CUDA has): its reference is the float32 op on the same values.
    want = fn(*[x.float() for x in xs])
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-5)
    rounded = fn(*[x.to("tpu") for x in xs])
    assert rounded.dtype == dtype and (rounded.float().cpu() - want).abs().max() > 0
    same = fn(*[x.to("tpu") for x in xs], out_dtype=dtype)
    assert torch.equal(same.cpu(), rounded.cpu())


def test_out_dtype_bad_input():
    a = torch.randn(2, 3, device="tpu")
    with pytest.raises(RuntimeError, match="out_dtype must be the same as input dtype or fp32"):
        torch.mm(a, a.t(), out_dtype=torch.bfloat16)


def test_xla_optimization_level_compiles_its_own_programs():
    assert torch.backends.tpu.xla_optimization_level is None
    x = torch.randn(6, 5)
    xd = x.to("tpu")
    torch.testing.assert_close((xd.exp() * 2).cpu(), x.exp() * 2)
    before = misses()
    torch.backends.tpu.xla_optimization_level = 0
    assert torch.backends.tpu.xla_optimization_level == 0
    torch.testing.assert_close((xd.exp() * 2).cpu(), x.exp() * 2)
    assert misses() >= before + 2  # exp and mul, compiled again at level 0
    with pytest.raises(ValueError, match="not 0..3"):
        torch.backends.tpu.xla_optimization_level = 7
    with pytest.raises(TypeError, match="None or an int"):
        torch.backends.tpu.xla_optimization_level = "fast"
    assert torch.backends.tpu.xla_optimization_level == 0
