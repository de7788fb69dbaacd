"""The grouped-matmul kernel (torch_tpu.kernels.grouped_matmul): torch._grouped_mm
through megablox's Pallas TPU kernels (gmm for the rows-grouped layout that
MoE layers call, tgmm for its weight gradient), run here through Pallas'
interpret lowering (torch_tpu._kernel_paths.grouped_mm("kernel")), in strict
eager, fused eager and torch.compile(backend="tpu"), forward and backward,
compared with torch on the CPU and with the XLA lowering on tpu. On this
plugin the automatic choice never takes the kernel."""
import pytest
import torch

import torch_tpu  # noqa: F401

pytest.importorskip("jax", reason="the jax extra is not installed: bash scripts/setup.sh --jax")

from op_modes import MODES, external_modules_inlined, running  # noqa: E402
from torch_tpu._kernel_paths import grouped_mm  # noqa: E402
from torch_tpu.kernels import grouped_matmul  # noqa: E402

grouped_matmul.register()
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.bfloat16: dict(rtol=2e-2, atol=1e-1)}



def _moe_step(a, w, offs, device, wrap=lambda f: f):
    """Experts over their tokens, forward and backward: rows past offs[-1]
    are left out (the CPU kernel leaves them unwritten)."""
    at, wt = a.detach().to(device).requires_grad_(), w.detach().to(device).requires_grad_()
    rows = int(offs[-1])

    def step(at, wt, offs):
        out = torch._grouped_mm(at, wt, offs)
        out[:rows].float().square().sum().backward()
        return out

    out = wrap(step)(at, wt, offs.to(device))
    return [out.detach().cpu()[:rows], at.grad.cpu()[:rows], wt.grad.cpu()]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("sizes", [(64, 0, 128, 40), (128, 128)], ids=["uneven", "whole_tiles"])
def test_kernel_equals_the_cpu_and_the_xla_lowering(mode, dtype, sizes):
    if mode == "compile" and dtype != torch.bfloat16:
        pytest.skip("Dynamo traces _grouped_mm with PyTorch's meta kernel, which takes bfloat16 only")
    torch.manual_seed(0)
    groups = len(sizes)
    a, w = torch.randn(256, 128).to(dtype) / 4, torch.randn(groups, 128, 128).to(dtype) / 4
    offs = torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32)
    cpu = _moe_step(a, w, offs, "cpu")
    with grouped_mm("xla"):
        with running(mode) as m:
            xla = _moe_step(a, w, offs, "tpu", m.wrap)
    with grouped_mm("kernel"):
        before = external_modules_inlined()
        with running(mode) as m:
            kernel = _moe_step(a, w, offs, "tpu", m.wrap)
        assert external_modules_inlined() - before >= 2  # gmm (forward, input gradient) and tgmm (weight gradient)
    for got, via_xla, want in zip(kernel, xla, cpu):
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want.float(), **TOL[dtype])
        torch.testing.assert_close(got.float(), via_xla.float(), **TOL[dtype])


def test_rows_past_the_last_group_are_zeros():
    a, w = torch.ones(256, 128, device="tpu"), torch.ones(2, 128, 128, device="tpu")
    offs = torch.tensor([100, 150], dtype=torch.int32, device="tpu")
    with grouped_mm("kernel"):
        out = torch._grouped_mm(a, w, offs).cpu()
    assert out[:150].eq(128).all() and out[150:].eq(0).all()


def test_shapes_the_kernel_cannot_tile_take_the_xla_lowering():
    a, w = torch.randn(200, 128), torch.randn(2, 128, 128)  # 200 rows: neither one tile nor whole tiles
    offs = torch.tensor([90, 180], dtype=torch.int32)
    want = torch._grouped_mm(a, w, offs)[:180]
    with grouped_mm("kernel"):
        before = external_modules_inlined()
        got = torch._grouped_mm(a.to("tpu"), w.to("tpu"), offs.to("tpu")).cpu()[:180]
        assert external_modules_inlined() == before
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_the_automatic_choice_off_tpu_is_xla():
    a, w = torch.randn(256, 128, device="tpu"), torch.randn(2, 128, 128, device="tpu")
    before = external_modules_inlined()
    torch._grouped_mm(a, w, torch.tensor([128, 256], dtype=torch.int32, device="tpu")).cpu()
    assert external_modules_inlined() == before


def test_bad_path_raises():
    with pytest.raises(ValueError, match="grouped_mm path must be one of"):
        grouped_mm("triton")
