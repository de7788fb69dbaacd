"""flex_attention on tpu tensors (patch flex_attention_device): eager, and
compiled with backend="tpu" and with no backend, forward and backward, with a
score function and a block mask. The forward is compared with flex_attention
on the CPU; the gradients with SDPA on the CPU under the same bias and mask
(PyTorch refuses flex_attention's backward on the CPU). Other devices keep
PyTorch's device check."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_tpu
import torch_tpu.compiler

torch_tpu.compiler.register()
L = 128


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def distance_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.01


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 2, L, 16, generator=g).to(dtype) for _ in range(3)]


def _sdpa_reference(q, k, v):
    """The same attention as SDPA with a float mask: its output and gradients."""
    i = torch.arange(L)
    bias = ((i[:, None] - i[None, :]) * 0.01).masked_fill(i[:, None] < i[None, :], float("-inf"))
    ins = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*ins, attn_mask=bias)
    out.square().sum().backward()
    return [out.detach()] + [t.grad for t in ins]


@pytest.mark.parametrize("how", ["eager", "backend_tpu", "no_backend"])
def test_flex_attention_equals_the_cpu(how):
    torch._dynamo.reset()
    q, k, v = _inputs()
    want_forward = flex_attention(q, k, v, score_mod=distance_bias,
                                  block_mask=create_block_mask(causal, 1, 1, L, L, device="cpu"))
    want = _sdpa_reference(q, k, v)
    mask = create_block_mask(causal, 1, 1, L, L, device="tpu")

    def attend(q, k, v):
        return flex_attention(q, k, v, score_mod=distance_bias, block_mask=mask)

    fn = {"eager": attend, "backend_tpu": torch.compile(attend, backend="tpu"),
          "no_backend": torch.compile(attend)}[how]
    before = torch_tpu.compile_stats()["graphs"]
    torch_tpu.reset_fallback_ops()
    ins = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    out = fn(*ins)
    out.square().sum().backward()
    torch.testing.assert_close(out.detach().cpu(), want_forward, rtol=1e-5, atol=1e-5)
    for got, expected in zip([out.detach()] + [t.grad for t in ins], want):
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-5)
    assert not torch_tpu.fallback_ops(), torch_tpu.fallback_ops()
    if how != "eager":  # the whole call became torch_tpu programs
        assert torch_tpu.compile_stats()["graphs"] > before
    torch._dynamo.reset()


def test_other_devices_keep_pytorchs_check():
    q, k, v = [t.requires_grad_() for t in _inputs()]
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q, k, v)
