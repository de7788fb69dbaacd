"""nn.TransformerEncoder with a padding mask in eval mode runs on tpu as on the
CPU: a left-aligned mask takes PyTorch's nested-tensor fast path (padded
batch -> nested tensor -> fused layers -> padded, padded positions exactly 0);
other configurations run the dense layers. Also the basics of tpu nested
tensors (construction, .to()/.cpu(), to_padded_tensor, unbind) against the
CPU, and a clear error for an op tpu nested tensors do not have.

Runs with TORCH_TPU_FALLBACK=error (tests/conftest.py): nothing falls back."""
import pytest
import torch
import torch.nn as nn
import torch_tpu

B, L, E, H = 4, 6, 16, 2

pytestmark = pytest.mark.filterwarnings("ignore:.*nested tensors is in prototype stage")


def _pad_mask(kind):
    """(B, L) key padding mask, true = padding; the bool says if it is left-aligned."""
    pad = torch.zeros(B, L, dtype=torch.bool)
    if kind == "ragged":  # a row without padding, one with a single token, an empty row
        for row, length in enumerate([6, 4, 1, 0]):
            pad[row, length:] = True
    elif kind == "all-but-one":
        pad[:, 1:] = True
    elif kind == "gap":  # padding not at the end: the CPU skips the nested path
        pad[1, 1] = True
        pad[2, 4:] = True
        return pad, False
    return pad, True


def _encoder(batch_first, norm_first, activation, layers, dtype=torch.float32):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 32, batch_first=batch_first, norm_first=norm_first,
                                       activation=activation)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=True).eval().to(dtype)


def _run_both(enc, x, pad, mode="strict"):
    with torch.no_grad():
        ref = enc(x, src_key_padding_mask=pad)
        with torch_tpu.eager_mode(mode):
            out = enc.to("tpu")(x.to("tpu"), src_key_padding_mask=pad.to("tpu")).cpu()
    return out, ref


def _check(out, ref, pad, nested_path, batch_first, atol):
    torch.testing.assert_close(out, ref, atol=atol, rtol=atol, equal_nan=True)
    padded = pad if batch_first else pad.t()
    # The nested path gives exact zeros at padded positions (to_padded_tensor(0.)),
    # the dense path computed values: on tpu exactly as on the CPU.
    if padded.any():
        assert bool((ref[padded] == 0).all()) == nested_path
        assert bool((out[padded] == 0).all()) == nested_path


@pytest.mark.parametrize("mask", ["ragged", "all-but-one", "none", "gap"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_encoder_padding_mask_matches_cpu(batch_first, norm_first, mask):
    enc = _encoder(batch_first, norm_first, "relu", 2)
    pad, aligned = _pad_mask(mask)
    x = torch.randn(B, L, E) if batch_first else torch.randn(L, B, E)
    out, ref = _run_both(enc, x, pad)
    nested_path = batch_first and not norm_first and aligned and bool(pad.any())
    _check(out, ref, pad, nested_path, batch_first, 1e-5)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("activation,layers", [("gelu", 1), ("relu", 3), ("gelu", 3)])
def test_encoder_nested_path_layers_and_activations(activation, layers, mode):
    enc = _encoder(True, False, activation, layers)
    pad, _ = _pad_mask("ragged")
    out, ref = _run_both(enc, torch.randn(B, L, E), pad, mode)
    _check(out, ref, pad, True, True, 1e-5)


def test_encoder_nested_path_repeat_call_compiles_nothing():
    enc = _encoder(True, False, "relu", 2).to("tpu")
    pad, _ = _pad_mask("ragged")
    x, pad = torch.randn(B, L, E).to("tpu"), pad.to("tpu")
    with torch.no_grad():
        first = enc(x, src_key_padding_mask=pad).cpu()
        before = torch_tpu.cache_info()["compiles"]
        again = enc(x, src_key_padding_mask=pad).cpu()
    assert torch_tpu.cache_info()["compiles"] == before
    assert torch.equal(first, again)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_encoder_nested_path_half_precision(dtype):
    enc = _encoder(True, False, "gelu", 2, dtype)
    pad, _ = _pad_mask("ragged")
    out, ref = _run_both(enc, torch.randn(B, L, E, dtype=dtype), pad)
    assert out.dtype == dtype
    _check(out.float(), ref.float(), pad, True, True, 3e-2)


def test_transformer_with_masks_matches_cpu():
    torch.manual_seed(0)
    model = nn.Transformer(E, H, 2, 1, 32, batch_first=True).eval()
    src, tgt = torch.randn(B, L, E), torch.randn(B, 5, E)
    pad, _ = _pad_mask("ragged")
    pad[3, 0] = False  # a decoder query may not see an all-masked memory (NaN on both sides)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    kw = dict(tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    with torch.no_grad():
        ref = model(src, tgt, **kw)
        out = model.to("tpu")(src.to("tpu"), tgt.to("tpu"), **{k: v.to("tpu") for k, v in kw.items()})
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask", ["ragged", "gap"])
def test_nested_tensor_from_mask_matches_cpu(mask):
    keep = ~_pad_mask(mask)[0]
    x = torch.randn(B, L, E)
    aligned = torch._nested_tensor_from_mask_left_aligned(x, keep)
    assert torch._nested_tensor_from_mask_left_aligned(x.to("tpu"), keep.to("tpu")) == aligned
    if not aligned:
        with pytest.raises(RuntimeError, match="left-aligned"):
            torch._nested_tensor_from_mask(x.to("tpu"), keep.to("tpu"))
    ref = torch._nested_tensor_from_mask(x, keep, mask_check=False)
    nt = torch._nested_tensor_from_mask(x.to("tpu"), keep.to("tpu"), mask_check=False)
    assert nt.is_nested and nt.device.type == "tpu"
    assert torch.equal(nt._nested_tensor_size(), ref._nested_tensor_size())
    for a, b in zip(nt.unbind(), ref.unbind()):
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="Mask size should match input size"):
        torch._nested_tensor_from_mask(x.to("tpu"), keep[:, :3].to("tpu"))


_SHAPES = {
    "rows": [(2, 3), (0, 3), (4, 3)],  # same trailing size: padded by one gather of rows
    "ragged": [(2, 3, 4), (5, 1, 4), (0, 2, 4)],  # ragged in several dims: padded per component
    "ragged-2d": [(3, 2), (1, 5)],
}


def test_nested_from_padded_matches_cpu():
    padded = torch.randn(3, 4, 5)
    sizes = torch.tensor([[2, 5], [4, 3], [0, 1]])
    ref = torch._nested_from_padded(padded, sizes)
    nt = torch._nested_from_padded(padded.to("tpu"), sizes)
    assert nt.is_nested and nt.device.type == "tpu"
    for a, b in zip(nt.unbind(), ref.unbind()):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)


def _components(dtype, shapes="ragged"):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(*s, generator=g) * 10).to(dtype) for s in _SHAPES[shapes]]


@pytest.mark.parametrize("shapes", list(_SHAPES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_nested_round_trip_and_to_padded_tensor(dtype, shapes):
    parts = _components(dtype, shapes)
    ref = torch.nested.nested_tensor(parts)
    for nt in (ref.to("tpu"), torch.nested.nested_tensor(parts, device="tpu")):
        assert nt.is_nested and nt.device.type == "tpu" and nt.dtype == dtype and nt.is_contiguous()
        assert nt.dim() == ref.dim() and nt.size(0) == len(parts)
        assert torch.equal(nt._nested_tensor_size(), ref._nested_tensor_size())
        back = nt.cpu()
        assert back.is_nested and back.device.type == "cpu"
        for a, b, c in zip(back.unbind(), nt.unbind(), parts):
            assert torch.equal(a, c) and b.device.type == "tpu" and torch.equal(b.cpu(), c)
        for padding in (0.0, -3.0):
            torch.testing.assert_close(nt.to_padded_tensor(padding).cpu(), ref.to_padded_tensor(padding),
                                       rtol=0, atol=0)
        size = [len(parts)] + [m + 1 for m in ref.to_padded_tensor(0.0).shape[1:]]
        torch.testing.assert_close(nt.to_padded_tensor(1.0, size).cpu(), ref.to_padded_tensor(1.0, size),
                                   rtol=0, atol=0)
        with pytest.raises(RuntimeError, match="Truncation is not supported"):
            nt.to_padded_tensor(0.0, [len(parts)] + [1] * (ref.dim() - 1))
        for copy in (nt.clone(), nt.detach()):
            assert copy.is_nested and copy.device.type == "tpu"
            torch.testing.assert_close(copy.to_padded_tensor(0.0).cpu(), ref.to_padded_tensor(0.0),
                                       rtol=0, atol=0)


def test_nested_dtype_conversion_and_copy():
    parts = _components(torch.float32)
    nt = torch.nested.nested_tensor(parts, device="tpu")
    half = nt.to(torch.float16)
    assert half.is_nested and half.device.type == "tpu" and half.dtype == torch.float16
    ref = torch.nested.nested_tensor(parts).to(torch.float16)
    torch.testing.assert_close(half.to_padded_tensor(0.0).cpu(), ref.to_padded_tensor(0.0), rtol=0, atol=0)
    dst = torch.nested.nested_tensor([torch.zeros_like(p) for p in parts], device="tpu")
    dst.copy_(torch.nested.nested_tensor(parts))
    torch.testing.assert_close(dst.to_padded_tensor(0.0).cpu(), torch.nested.nested_tensor(parts)
                               .to_padded_tensor(0.0), rtol=0, atol=0)


def test_unsupported_nested_op_names_it():
    nt = torch.nested.nested_tensor(_components(torch.float32), device="tpu")
    with pytest.raises(NotImplementedError, match=r"aten::add\.Tensor.*to_padded_tensor.*CPU"):
        nt + nt
    with pytest.raises(NotImplementedError, match=r"aten::sum"):
        nt.sum()
    assert not torch_tpu.fallback_ops()


def test_jagged_layout_basics_match_cpu():
    """NJT (layout=torch.jagged) is a Python subclass over dense values and
    offsets: construction and elementwise ops are dense tpu ops; to_padded_tensor
    and nested_from_padded use the jagged<->padded conversions."""
    from torch.nested._internal.nested_tensor import nested_from_padded
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, 4, generator=g) for n in (2, 0, 5, 1)]
    ref = torch.nested.nested_tensor(parts, layout=torch.jagged)
    nj = torch.nested.nested_tensor(parts, layout=torch.jagged, device="tpu")
    assert nj.is_nested and nj.device.type == "tpu" and nj.values().device.type == "tpu"
    y, r = (nj * 2 + 1).sin(), (ref * 2 + 1).sin()
    torch.testing.assert_close(y.values().cpu(), r.values())
    padded, ref_padded = y.to_padded_tensor(-1.0), r.to_padded_tensor(-1.0)
    torch.testing.assert_close(padded.cpu(), ref_padded)
    back = nested_from_padded(padded, offsets=y.offsets())
    torch.testing.assert_close(back.values().cpu(), r.values())


@pytest.mark.parametrize("max_len", [3, 7])
def test_jagged_dense_conversions_match_cpu(max_len):
    g = torch.Generator().manual_seed(1)
    values = torch.randn(8, 3, generator=g)
    offsets = torch.tensor([0, 2, 2, 7, 8])
    ref = torch.ops.aten._jagged_to_padded_dense_forward(values, [offsets], [max_len], 0.5)
    out = torch.ops.aten._jagged_to_padded_dense_forward(values.to("tpu"), [offsets.to("tpu")], [max_len], 0.5)
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
    dense = torch.randn(4, 7, 3, generator=g)
    for total in (None, 8):
        ref = torch.ops.aten._padded_dense_to_jagged_forward(dense, [offsets], total)
        out = torch.ops.aten._padded_dense_to_jagged_forward(dense.to("tpu"), [offsets.to("tpu")], total)
        torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
