"""The attention kernel (torch_tpu.kernels.attention): SDPA forward and
backward through JAX's Pallas flash-attention kernel, run here through
Pallas' interpret lowering (torch_tpu._sdpa_path.forced("kernel")), in strict
eager, fused eager and torch.compile(backend="tpu"), compared with torch on
the CPU and with the XLA (dense) lowering on tpu. On this plugin the
automatic choice never takes the kernel (it is for TPU plugins)."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

pytest.importorskip("jax", reason="the jax extra is not installed: bash scripts/setup.sh --jax")

from op_modes import MODES, external_modules_inlined, running  # noqa: E402
from torch_tpu._sdpa_path import forced  # noqa: E402
from torch_tpu.kernels import attention  # noqa: E402

attention.register()
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}



def _sdpa_with_grads(q, k, v, causal, device, wrap=lambda f: f):
    ins = [t.detach().to(device).requires_grad_() for t in (q, k, v)]

    def step(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.float().square().sum().backward()
        return out

    out = wrap(step)(*ins)
    return [out.detach().cpu()] + [t.grad.cpu() for t in ins]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_equals_the_cpu_and_the_xla_lowering(mode, dtype, causal):
    torch.manual_seed(0)
    q, k, v = [torch.randn(2, 2, 256, 64).to(dtype) for _ in range(3)]
    cpu = _sdpa_with_grads(q.float(), k.float(), v.float(), causal, "cpu")
    with forced("dense"):
        with running(mode) as m:
            dense = _sdpa_with_grads(q, k, v, causal, "tpu", m.wrap)
    with forced("kernel"):
        before = external_modules_inlined()
        with running(mode) as m:
            kernel = _sdpa_with_grads(q, k, v, causal, "tpu", m.wrap)
        assert external_modules_inlined() - before >= 2  # the forward and the backward kernel are in the programs
    for got, via_xla, want in zip(kernel, dense, cpu):
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want, **TOL[dtype])
        torch.testing.assert_close(got.float(), via_xla.float(), **TOL[dtype])


def test_unequal_key_and_query_lengths():
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 2, 128, 32), torch.randn(1, 2, 384, 32), torch.randn(1, 2, 384, 32)
    want = _sdpa_with_grads(q, k, v, False, "cpu")
    with forced("kernel"):
        got = _sdpa_with_grads(q, k, v, False, "tpu")
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float32])


@pytest.mark.parametrize("call", ["mask", "gqa", "float64"])
def test_calls_the_kernel_does_not_fit_take_the_xla_lowering(call):
    torch.manual_seed(2)
    dtype = torch.float64 if call == "float64" else torch.float32
    q = torch.randn(1, 4, 128, 32, dtype=dtype)
    k = torch.randn(1, 2 if call == "gqa" else 4, 128, 32, dtype=dtype)
    v = torch.randn_like(k)
    mask = torch.rand(128, 128) > 0.3 if call == "mask" else None
    kw = dict(attn_mask=mask, enable_gqa=call == "gqa")
    want = F.scaled_dot_product_attention(q, k, v, **kw)
    with forced("kernel"):
        before = external_modules_inlined()
        got = F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"),
                                             **{**kw, "attn_mask": None if mask is None else mask.to("tpu")})
        torch.testing.assert_close(got.cpu(), want)
        assert external_modules_inlined() == before


def test_the_automatic_choice_off_tpu_is_xla():
    q = torch.randn(1, 2, 256, 64, device="tpu")
    before = external_modules_inlined()
    with forced("auto"):
        F.scaled_dot_product_attention(q, q, q, is_causal=True).cpu()
    assert external_modules_inlined() == before
    from torch_tpu.kernels import _load_for_plugin
    assert _load_for_plugin() is False  # the CPU plugin: the loader registers nothing


def test_a_length_the_kernel_cannot_block_raises_naming_it():
    q = torch.randn(1, 2, 200, 64, device="tpu")  # 200 rows in 128-row blocks
    with forced("kernel"):
        with pytest.raises(RuntimeError, match="tpu_kernels::flash_attention_forward"):
            F.scaled_dot_product_attention(q, q, q).cpu()
    # the process goes on, and the XLA lowering takes the same call
    assert F.scaled_dot_product_attention(q, q, q).shape == (1, 2, 200, 64)


def test_a_larger_block_from_the_tuner_knob_equals_the_xla_lowering(monkeypatch):
    from torch_tpu.kernels import blocks

    used = []
    impl = attention._fa._flash_attention_impl

    def recording(*args):
        used.append(args[9:11])  # block_q, block_k_major
        return impl(*args)

    monkeypatch.setattr(attention._fa, "_flash_attention_impl", recording)
    torch.manual_seed(3)
    q, k, v = [torch.randn(1, 2, 512, 32) for _ in range(3)]  # a shape no other test traces
    with forced("dense"):
        dense = _sdpa_with_grads(q, k, v, True, "tpu")
    blocks.set_flash_attention_block(256)
    try:
        with forced("kernel"):
            kernel = _sdpa_with_grads(q, k, v, True, "tpu")
    finally:
        blocks.set_flash_attention_block(128)
    assert used and all(b == (256, 256) for b in used)
    for got, want in zip(kernel, dense):
        torch.testing.assert_close(got, want, **TOL[torch.float32])
