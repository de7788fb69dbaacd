"""scaled_dot_product_attention: plain, causal, additive and boolean masks,
grouped-query attention (enable_gqa), explicit scale; forward and backward
compared with the CPU, and proof that it runs as one native program each
way instead of the decomposed math path.

Both lowerings are covered: the dense one (short key sequences), and the
blockwise one (online softmax over key blocks), reached by long key
sequences and, on the same small rows, by forcing it with tiny blocks
(torch_tpu._sdpa_path.forced); the dense lowering is its reference on tpu,
and its memory is checked to grow with L + S, not L * S."""
import ctypes

import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, AtenOpLog, OpCase, parametrize, run_case
from torch_tpu._sdpa_path import forced

TOLS = dict(rtol=2e-2, atol=2e-2)  # bf16/f16 rows; f32 rows use the dtype default
Q = (2, 4, 5, 8)
KV = (2, 4, 7, 8)
KV_GQA = (2, 2, 7, 8)


def sdpa(**kw):
    def fn(q, k, v, *mask):
        m = mask[0] if mask else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    return fn


def bool_mask(shape, dtype, i):
    if i < 3:
        return (torch.rand(shape, generator=torch.Generator().manual_seed(i), dtype=torch.float64) * 2 - 1).to(dtype)
    keep = torch.rand(shape, generator=torch.Generator().manual_seed(i)) > 0.3
    keep[..., 0] = True  # every query keeps a key
    return keep


def fully_masked(shape, dtype, i):
    if i < 3:
        return (torch.rand(shape, generator=torch.Generator().manual_seed(i), dtype=torch.float64) * 2 - 1).to(dtype)
    keep = torch.ones(shape, dtype=torch.bool)
    keep[..., 1, :] = False  # query 1 sees no key: PyTorch gives zeros
    return keep


CASES = [
    OpCase("sdpa", sdpa(), [[Q, Q, Q], [Q, KV, KV], [(1, 1, 1, 4)] * 3], FLOATS, grad=True),
    OpCase("sdpa_causal", sdpa(is_causal=True), [[Q, Q, Q], [Q, KV, KV], [(2, 3, 7, 8), KV[:1] + (3, 5, 8), KV[:1] + (3, 5, 8)]],
           FLOATS, grad=True),
    OpCase("sdpa_additive_mask", sdpa(), [[Q, KV, KV, (5, 7)], [Q, KV, KV, (2, 1, 5, 7)], [Q, KV, KV, (2, 4, 5, 7)]],
           FLOATS, grad=True),
    OpCase("sdpa_bool_mask", sdpa(), [[Q, KV, KV, (2, 1, 5, 7)], [Q, KV, KV, (5, 7)]], FLOAT, grad=True,
           make=bool_mask, noncontiguous=False),
    OpCase("sdpa_fully_masked_row", sdpa(), [[Q, KV, KV, (5, 7)]], FLOAT, grad=True, make=fully_masked,
           noncontiguous=False),
    OpCase("sdpa_gqa", sdpa(enable_gqa=True), [[Q, KV_GQA, KV_GQA], [(1, 6, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4)]],
           FLOATS, grad=True),
    OpCase("sdpa_gqa_causal", sdpa(enable_gqa=True, is_causal=True), [[Q, KV_GQA, KV_GQA]], FLOATS, grad=True),
    OpCase("sdpa_gqa_mask", sdpa(enable_gqa=True), [[Q, KV_GQA, KV_GQA, (2, 1, 5, 7)]], FLOAT, grad=True),
    OpCase("sdpa_scale", sdpa(scale=0.3), [[Q, KV, KV]], FLOAT, grad=True),
    OpCase("sdpa_value_dim", sdpa(), [[Q, KV, KV[:3] + (6,)]], FLOAT, grad=True),  # math path (head sizes differ)
]


@parametrize(CASES)
def test_sdpa(case, shapes, dtype):
    if dtype != torch.float32:
        case = OpCase(**{**case.__dict__, **TOLS})
    run_case(case, shapes, dtype)


# The same rows through the blockwise lowering, with blocks of 3 keys: 5 and
# 7 keys make 2 and 3 blocks, the last one padded.
@parametrize([case for case in CASES if case.name != "sdpa_value_dim"])
def test_sdpa_blockwise(case, shapes, dtype):
    if dtype != torch.float32:
        case = OpCase(**{**case.__dict__, **TOLS})
    with forced("blockwise", block_keys=3):
        run_case(case, shapes, dtype)


# Past the dense threshold (256 keys, 16 queries) the automatic choice is
# blockwise: 600 keys are 5 blocks of 128, the last one padded.
LONG = 600
LONG_Q, LONG_KV, LONG_KV_GQA = (1, 2, 16, 8), (1, 2, LONG, 8), (1, 1, LONG, 8)
LONG_CASES = [
    OpCase("sdpa_long", sdpa(), [[LONG_Q, LONG_KV, LONG_KV]], FLOATS, grad=True, noncontiguous=False),
    OpCase("sdpa_long_causal", sdpa(is_causal=True), [[LONG_Q, LONG_KV, LONG_KV]], FLOAT, grad=True,
           noncontiguous=False),
    OpCase("sdpa_long_bool_mask", sdpa(), [[LONG_Q, LONG_KV, LONG_KV, (1, 1, 16, LONG)]], FLOAT, grad=True,
           make=bool_mask, noncontiguous=False),
    OpCase("sdpa_long_additive_mask_gqa", sdpa(enable_gqa=True), [[LONG_Q, LONG_KV_GQA, LONG_KV_GQA, (16, LONG)]],
           FLOAT, grad=True, noncontiguous=False),
]


@parametrize(LONG_CASES)
def test_sdpa_long(case, shapes, dtype):
    if dtype != torch.float32:
        case = OpCase(**{**case.__dict__, **TOLS})
    run_case(case, shapes, dtype)


def _forward_backward(q, k, v, mask, **kw):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    out.backward(torch.ones_like(out))
    return [t.cpu() for t in (out, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("kw,mask", [(dict(is_causal=True), False), (dict(enable_gqa=True), True)])
def test_sdpa_blockwise_equals_dense(kw, mask):
    """The dense lowering is the reference: the same tpu call both ways, with
    blocks that do not divide the keys."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 300, 16, generator=g).to("tpu")
    kv_heads = 2 if kw.get("enable_gqa") else 4
    k = torch.randn(2, kv_heads, 300, 16, generator=g).to("tpu")
    v = torch.randn(2, kv_heads, 300, 16, generator=g).to("tpu")
    m = (torch.rand(300, 300, generator=g) > 0.2).to("tpu") if mask else None
    with forced("dense"):
        dense = _forward_backward(q, k, v, m, **kw)
    with forced("blockwise", block_keys=64):
        blockwise = _forward_backward(q, k, v, m, **kw)
    for d, b in zip(dense, blockwise):
        torch.testing.assert_close(b, d, rtol=1e-5, atol=1e-5)


def _peak_rss_growth(fn):
    """Bytes the process's peak resident set grew by while fn() ran (the CPU
    plugin's device memory is host memory; XLA's temporaries count)."""
    def rss(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))
    # Freed heap pages stay resident until trimmed, and a step reusing them
    # would not raise the peak.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak (VmHWM) to the current size
    before = rss("VmRSS")
    fn()
    return rss("VmHWM") - before


def test_sdpa_long_memory_grows_with_length_not_its_square():
    # L = S = 8192, one head: the dense score matrix alone is 256 MiB; a
    # blockwise tile (8192 x 128 f32) is 4 MiB. Each path's first call is
    # measured (compile included: a few MiB), since the process may keep
    # what a program's first run freed and reuse it for later runs.
    n = 8192
    q = torch.randn(1, 1, n, 16, device="tpu")

    def step():
        F.scaled_dot_product_attention(q, q, q).cpu()
    with forced("auto"):  # an empty program cache: blockwise by length
        assert _peak_rss_growth(step) < 128 * 2**20
    with forced("dense"):
        assert _peak_rss_growth(step) > 256 * 2**20


@pytest.mark.parametrize("kw,kv_heads,mask", [
    (dict(), 4, False), (dict(is_causal=True), 4, False), (dict(), 4, True),
    (dict(enable_gqa=True, is_causal=True), 2, False)])
def test_sdpa_is_one_program_each_way(kw, kv_heads, mask):
    q = torch.randn(2, 4, 5, 8, device="tpu", requires_grad=True)
    k = torch.randn(2, kv_heads, 5, 8, device="tpu", requires_grad=True)
    v = torch.randn(2, kv_heads, 5, 8, device="tpu", requires_grad=True)
    m = torch.randn(5, 5, device="tpu") if mask else None
    with AtenOpLog() as log:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
        out.sum().backward()
    attention = [o for o in log.ops if "attention" in o]
    assert attention == ["_scaled_dot_product_flash_attention_for_cpu",
                         "_scaled_dot_product_flash_attention_for_cpu_backward"], log.ops
    assert not {"bmm", "matmul", "_softmax", "_safe_softmax"} & set(log.ops), log.ops


def test_sdpa_dropout_runs_natively():
    # Dropout takes PyTorch's math path; its random mask differs from the
    # CPU's, so check what does not depend on it: p=1 drops everything.
    q = torch.randn(1, 2, 3, 4, device="tpu")
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    assert out.device.type == "tpu"
    assert torch.equal(out.cpu(), torch.zeros(1, 2, 3, 4))


def test_sdpa_bad_heads_raise():
    q = torch.randn(1, 3, 2, 4)
    k = torch.randn(1, 2, 2, 4)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), k.to("tpu"), enable_gqa=True)
