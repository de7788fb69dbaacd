"""Shape buckets: torch.compile(dynamic=True) / mark_dynamic compile one
program per bucket of sizes (next power of two by default), and every length
in the bucket gives the same results as the CPU's unpadded run, forward and
backward."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_tpu
from torch_tpu.compiler import set_shape_buckets


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    set_shape_buckets("pow2")
    yield
    set_shape_buckets("pow2")
    torch._dynamo.reset()


VOCAB, EMBD, HEADS, CTX = 50, 16, 2, 32


class Attention(nn.Module):
    """Causal attention written out: a causal buffer sliced to the length,
    masked_fill, softmax over the padded key dimension, matmul over it."""

    def __init__(self):
        super().__init__()
        self.qkv, self.proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
        self.register_buffer("causal", torch.ones(CTX, CTX, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(EMBD, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class TinyGPT(nn.Module):
    def __init__(self, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(CTX, EMBD)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
        self.attn = Attention()
        self.fc = nn.Sequential(nn.Linear(EMBD, 4 * EMBD), nn.GELU(), nn.Linear(4 * EMBD, EMBD))
        self.sdpa = sdpa

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        if self.sdpa:
            b, t, c = x.shape
            q = self.ln1(x).view(b, t, HEADS, c // HEADS).transpose(1, 2)
            x = x + F.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2).reshape(b, t, c)
        else:
            x = x + self.attn(self.ln1(x))
        x = x + self.fc(self.ln2(x))
        return self.lnf(x) @ self.wte.weight.t()


def lm_loss(model, idx):
    logits = model(idx)
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), idx[:, 1:].reshape(-1)) + logits.mean()


def pair(make):
    torch.manual_seed(0)
    cpu = make()
    tpu = make().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu


def check_grads(cpu, tpu, atol=2e-5):
    for (name, p), q in zip(cpu.named_parameters(), tpu.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(q.grad.cpu(), p.grad, atol=atol, rtol=1e-4, msg=name)
        p.grad = q.grad = None


@pytest.mark.parametrize("sdpa", [False, True], ids=["written_out", "sdpa_causal"])
def test_training_lengths_share_a_bucket(sdpa):
    cpu, tpu = pair(lambda: TinyGPT(sdpa))
    step = torch.compile(lambda m, idx: lm_loss(m, idx), backend="tpu", dynamic=True)
    lengths = (9, 13, 16, 11, 5, 7)
    for t in lengths:
        idx = torch.randint(0, VOCAB, (3, t))
        ref = lm_loss(cpu, idx)
        ref.backward()
        loss = step(tpu, idx.to("tpu"))
        loss.backward()
        torch.testing.assert_close(loss.cpu(), ref, atol=2e-5, rtol=1e-5)
        check_grads(cpu, tpu)
    s = torch_tpu.compile_stats()
    assert s["bucket_fallbacks"] == {}
    # Buckets 16 (9, 13, 16, 11) and 8 (5, 7), the batch 3 -> 4: forward + backward each.
    assert s["bucketed_compiles"] == s["compiles"] == 4, s


def test_inference_outputs_have_real_shapes():
    cpu, tpu = pair(TinyGPT)
    f = torch.compile(tpu, backend="tpu", dynamic=True)
    with torch.no_grad():
        for t in (6, 7, 3):
            idx = torch.randint(0, VOCAB, (2, t))
            out = f(idx.to("tpu"))
            assert out.shape == (2, t, VOCAB)
            torch.testing.assert_close(out.cpu(), cpu(idx), atol=2e-5, rtol=1e-5)
    s = torch_tpu.compile_stats()
    assert s["bucket_fallbacks"] == {} and s["compiles"] == 2


def test_merged_dimension_output():
    """An output whose dimension merges two padded sizes (b*t) is packed and
    comes back with the real elements in order."""
    def f(x, w):
        return (x.reshape(-1, x.shape[-1]) @ w).relu()

    g = torch.compile(f, backend="tpu", dynamic=True)
    w = torch.randn(8, 4)
    for b, t in ((3, 5), (4, 7), (3, 6)):  # one bucket: (4, 8)
        x = torch.randn(b, t, 8)
        out = g(x.to("tpu"), w.to("tpu"))
        assert out.shape == (b * t, 4)
        torch.testing.assert_close(out.cpu(), f(x, w), atol=1e-5, rtol=1e-5)
    assert torch_tpu.compile_stats()["compiles"] == 1


def test_mark_dynamic():
    def f(x):
        return x.softmax(-1).sum(0) + x.mean()

    g = torch.compile(f, backend="tpu")
    for n in (5, 6, 7):
        x = torch.randn(3, n)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 1)
        torch.testing.assert_close(g(xt).cpu(), f(x), atol=1e-6, rtol=1e-5)
    s = torch_tpu.compile_stats()
    assert s["bucketed_compiles"] == 1 and s["bucket_fallbacks"] == {}


def test_unknown_op_compiles_per_shape_and_is_right():
    """cumsum has no padded rule: that graph compiles per exact shape (and says
    why), with the right results."""
    def f(x):
        return x.cumsum(1) * 2 + x[:, -1:]

    g = torch.compile(f, backend="tpu", dynamic=True)
    with pytest.warns(UserWarning, match="per exact shape"):
        for n in (5, 6):
            x = torch.randn(3, n)
            torch.testing.assert_close(g(x.to("tpu")).cpu(), f(x))
    s = torch_tpu.compile_stats()
    assert s["bucket_fallbacks"] and s["bucketed_compiles"] == 0 and s["compiles"] == 2


def test_select_from_the_end_is_not_padded():
    def f(x):
        return x[:, -1] + x.sum(1)

    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in (5, 6):
        x = torch.randn(3, n)
        torch.testing.assert_close(g(x.to("tpu")).cpu(), f(x))
    assert "from the end" in next(iter(torch_tpu.compile_stats()["bucket_fallbacks"].values()))


def test_explicit_buckets_and_off():
    def f(x):
        return x.sum(1)

    set_shape_buckets([8, 16])
    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 8, 12, 20):  # 20 is above the last bucket: its own size
        x = torch.randn(2, n)
        torch.testing.assert_close(g(x.to("tpu")).cpu(), f(x))
    assert torch_tpu.compile_stats()["compiles"] == 3
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    set_shape_buckets("off")
    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 5):
        g(torch.randn(2, n, device="tpu"))
    s = torch_tpu.compile_stats()
    assert s["compiles"] == 2 and s["bucketed_compiles"] == 0


@pytest.mark.parametrize("bad", ["powers", [0, 4], "8,x"])
def test_bad_bucket_spec(bad):
    with pytest.raises(ValueError, match="shape buckets"):
        set_shape_buckets(bad)


def test_hf_llama_training_lengths_share_a_bucket():
    """transformers' Llama (sdpa attention, the loss's label shift by
    constant_pad_nd): four lengths, one program forward and one backward."""
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      attn_implementation="sdpa")
    torch.manual_seed(0)
    cpu = transformers.LlamaForCausalLM(config)
    tpu = transformers.LlamaForCausalLM(config).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    f = torch.compile(tpu, backend="tpu", dynamic=True)
    for t in (9, 13, 11, 16):
        ids = torch.randint(0, 96, (2, t))
        ref = cpu(ids, labels=ids).loss
        ref.backward()
        loss = f(ids.to("tpu"), labels=ids.to("tpu")).loss
        loss.backward()
        torch.testing.assert_close(loss.cpu(), ref, atol=2e-5, rtol=1e-5)
        check_grads(cpu, tpu)
    s = torch_tpu.compile_stats()
    assert s["bucket_fallbacks"] == {} and s["bucketed_compiles"] == s["compiles"] == 2, s


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_max_over_the_padded_dimension(dtype):
    """amax's padding identity is -inf for floats and the lowest integer for ints."""
    def f(x):
        return x.amax(1) + x.sum(1)

    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in (5, 6, 7):
        x = -torch.arange(3 * n).reshape(3, n).to(dtype) - 1  # all negative: a padded 0 would win
        torch.testing.assert_close(g(x.to("tpu")).cpu(), f(x))
    s = torch_tpu.compile_stats()
    assert s["bucket_fallbacks"] == {} and s["compiles"] == 1, s


def test_backward_in_other_buckets_reads_real_saved_values():
    """A bucketed forward leaves its saved-for-backward values padded (no
    packing); a backward that runs with other buckets (here: the setting is
    "off" by then) unpacks their real contents and pads them again."""
    cpu, tpu = pair(TinyGPT)
    step = torch.compile(lambda m, idx: lm_loss(m, idx), backend="tpu", dynamic=True)
    for t in (9, 13):
        idx = torch.randint(0, VOCAB, (3, t))
        ref = lm_loss(cpu, idx)
        ref.backward()
        loss = step(tpu, idx.to("tpu"))
        set_shape_buckets("off")  # the backward now pads to the exact sizes
        loss.backward()
        set_shape_buckets("pow2")
        check_grads(cpu, tpu)
    s = torch_tpu.compile_stats()
    assert s["compiles"] == 3, s  # forward: bucket 16; backward: 9 and 13


def test_backward_without_a_padded_rule_reads_real_saved_values():
    """select's backward (select_scatter) has no padded rule: the forward runs
    bucketed, the backward per exact shape, on the saved values' real contents
    (a merged b*t dimension among them)."""
    def f(x, w):
        b, t, c = x.shape
        y = (x.reshape(b * t, c) @ w).relu().view(b, t, -1)
        return y[:, 0].sum() + (y * y).sum()

    g = torch.compile(f, backend="tpu", dynamic=True)
    w = torch.randn(8, 4)
    for b, t in ((3, 5), (3, 7)):
        x = torch.randn(b, t, 8, requires_grad=True)
        wc = w.clone().requires_grad_()
        f(x, wc).backward()
        xt = x.detach().to("tpu").requires_grad_()
        wt = w.to("tpu").requires_grad_()
        g(xt, wt).backward()
        torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(wt.grad.cpu(), wc.grad, atol=1e-5, rtol=1e-5)
    s = torch_tpu.compile_stats()
    assert any("select" in r for r in s["bucket_fallbacks"].values()), s
    assert s["bucketed_compiles"] == 1, s  # the forward
