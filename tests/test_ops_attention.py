"""scaled_dot_product_attention: plain, causal, additive and boolean masks,
grouped-query attention (enable_gqa), explicit scale; forward and backward
compared with the CPU, and proof that it runs as one native program each
way instead of the decomposed math path."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case

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


class _AtenLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kw,kv_heads,mask", [
    (dict(), 4, False), (dict(is_causal=True), 4, False), (dict(), 4, True),
    (dict(enable_gqa=True, is_causal=True), 2, False)])
def test_sdpa_is_one_program_each_way(kw, kv_heads, mask):
    q = torch.randn(2, 4, 5, 8, device="tpu", requires_grad=True)
    k = torch.randn(2, kv_heads, 5, 8, device="tpu", requires_grad=True)
    v = torch.randn(2, kv_heads, 5, 8, device="tpu", requires_grad=True)
    m = torch.randn(5, 5, device="tpu") if mask else None
    with _AtenLog() as log:
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
