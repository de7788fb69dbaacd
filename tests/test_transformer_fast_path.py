"""The inference fast paths of nn.MultiheadAttention and
nn.TransformerEncoderLayer (eval mode, no grad) run on tpu, against the CPU's
own fused kernels: every mask kind, pre/post norm, gelu/relu; an encoder with
a padding mask works with enable_nested_tensor=False (its nested fast path is
tested in test_nested_transformer.py)."""
import pytest
import torch
import torch.nn as nn
import torch_tpu  # noqa: F401

B, L, E, H = 3, 6, 16, 4


def _masks():
    g = torch.Generator().manual_seed(2)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 2:] = True
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    return {
        "none": (None, None),
        "key-padding": (pad, 1),
        "key-padding-float": (torch.zeros(B, L).masked_fill(pad, float("-inf")), 1),
        "attention": (causal, 0),
        "merged": (torch.rand(B, H, L, L, generator=g) > 0.7, 2),
    }


def _weights(dtype):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: (torch.randn(*s, generator=g) * 0.2).to(dtype)  # noqa: E731
    return r(3 * E, E), r(3 * E), r(E, E), r(E)


def _tpu(xs):
    return [x.to("tpu") if isinstance(x, torch.Tensor) else x for x in xs]


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("mask", list(_masks()))
@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
def test_native_multi_head_attention(mask, need_weights, average, mode):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(B, L, E, generator=g), torch.randn(B, L, E, generator=g)
    m, mask_type = _masks()[mask]
    args = [q, k, k, E, H, *_weights(torch.float32), m, need_weights, average, mask_type]
    ref = torch._native_multi_head_attention(*args)
    with torch_tpu.eager_mode(mode):
        out = torch._native_multi_head_attention(*_tpu(args))
        for o, r in zip(out, ref):
            if r is None:
                assert o is None
            else:
                torch.testing.assert_close(o.cpu(), r, atol=1e-5, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("mask", ["none", "key-padding", "attention"])
def test_encoder_layer_fast_path(norm_first, activation, mask):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 32, batch_first=True, norm_first=norm_first,
                                       activation=activation).eval()
    x = torch.randn(B, L, E)
    m, kind = _masks()[mask]
    kw = {"src_key_padding_mask": m} if kind == 1 else ({"src_mask": m} if kind == 0 else {})
    with torch.no_grad():
        ref = layer(x, **kw)
        out = layer.to("tpu")(x.to("tpu"), **{k: v.to("tpu") for k, v in kw.items()})
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)


def test_multihead_attention_module_in_eval_and_bf16():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
    x = torch.randn(B, L, E)
    pad = _masks()["key-padding"][0]
    with torch.no_grad():
        ref, ref_w = mha(x, x, x, key_padding_mask=pad)
        ref_nw = mha(x, x, x, need_weights=False)[0]
        mha_t = mha.to("tpu")
        out, w = mha_t(x.to("tpu"), x.to("tpu"), x.to("tpu"), key_padding_mask=pad.to("tpu"))
        torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w.cpu(), ref_w, atol=1e-5, rtol=1e-5)
        xb = x.to("tpu", torch.bfloat16)
        out16, _ = mha_t.to(torch.bfloat16)(xb, xb, xb, need_weights=False)
        torch.testing.assert_close(out16.cpu().float(), ref_nw, atol=5e-2, rtol=5e-2)


def test_encoder_with_padding_mask():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 32, batch_first=True)
    pad = _masks()["key-padding"][0]
    x = torch.randn(B, L, E)
    dense = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    with torch.no_grad():
        ref = dense(x, src_key_padding_mask=pad)
        out = dense.to("tpu")(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    nested = nn.TransformerEncoder(layer, 2).to("tpu").eval()
    with torch.no_grad():
        out = nested(x.to("tpu"), src_key_padding_mask=pad.to("tpu")).cpu()
    keep = ~pad  # the nested path leaves exact zeros at padded positions, the dense one values
    torch.testing.assert_close(out[keep], ref[keep], atol=1e-5, rtol=1e-5)
    assert (out[pad] == 0).all()
