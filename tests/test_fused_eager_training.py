"""A GPT-2-like training step in fused eager mode: how many clusters a step
runs and why, that its programs stop compiling after the first steps, and
that it trains exactly as strict eager and the CPU do."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

VOCAB, CTX, EMBD, HEADS, BATCH = 64, 16, 32, 4, 2


class Block(nn.Module):
    """Pre-LN attention (written out, causal) and a GELU MLP, as benchmarks/workloads/torch/gpt2.py."""

    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
        self.c_attn, self.c_proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
        self.c_fc, self.c_out = nn.Linear(EMBD, 4 * EMBD), nn.Linear(4 * EMBD, EMBD)
        self.register_buffer("causal", torch.ones(CTX, CTX, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.c_out(F.gelu(self.c_fc(self.ln_2(x))))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(CTX, EMBD)
        self.h = nn.ModuleList(Block() for _ in range(2))
        self.ln_f = nn.LayerNorm(EMBD)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def train(device, steps, per_step=None):
    """`steps` AdamW steps on one batch; returns the losses and parameters.
    per_step(i) runs after each step's synchronize."""
    torch.manual_seed(0)
    model = TinyGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (BATCH, CTX + 1), generator=g).to(device)
    idx, targets = tokens[:, :-1], tokens[:, 1:]
    losses = []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if device != "cpu":
            torch.tpu.synchronize()
        if per_step:
            per_step(i)
    return torch.stack([x.cpu() for x in losses]), {n: p.detach().cpu() for n, p in model.named_parameters()}


def without_key_bias(params):
    """The key's bias gets a gradient of exactly zero in exact arithmetic
    (softmax ignores a shift along its row), so its AdamW update is lr times
    rounding noise divided by rounding noise: it differs between any two
    correct implementations. Every other parameter is compared."""
    out = dict(params)
    for n in params:
        if n.endswith("c_attn.bias"):
            out[n] = torch.cat([params[n][:EMBD], params[n][2 * EMBD:]])
    return out


def cluster_counts(steps):
    """Per step from the second: (clusters, compiles, hits), and the flush reasons after all steps."""
    seen = []

    def per_step(i):
        s = torch_tpu.fused_stats()
        seen.append((s["clusters"], s["compiles"], s["hits"], dict(s["flush_reasons"])))

    train("tpu", steps, per_step)
    deltas = [tuple(b[k] - a[k] for k in range(3)) for a, b in zip(seen, seen[1:])]
    return deltas, seen[-1][3]


def test_a_step_is_one_cluster_ending_at_the_optimizer_step(fused):
    deltas, reasons = cluster_counts(6)
    # Step 1 ends a cluster at backward() (no optimizer step has ended one
    # yet) and one at AdamW's step(), which builds AdamW's state. Step 2 is
    # the first whole step, with the state in place: forward, backward and
    # AdamW as one program. From step 3 on it is a cache hit.
    assert reasons == {"backward": 1, "optimizer": 6}, reasons
    assert deltas[0] == (1, 1, 0)
    assert deltas[1:] == [(1, 0, 1)] * 4


def test_step_end_at_backward_keeps_two_clusters_a_step(fused, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_FUSED_STEP_END", "backward")
    deltas, reasons = cluster_counts(6)
    # Forward and backward end at backward(); AdamW at the synchronize.
    assert reasons == {"backward": 6, "synchronize": 6}, reasons
    assert [d[0] for d in deltas] == [2] * 5
    assert [d[1] for d in deltas[1:]] == [0] * 4 and [d[2] for d in deltas[1:]] == [2] * 4


def test_training_equals_strict_eager_and_cpu(fused):
    fused_losses, fused_params = train("tpu", 4)
    with torch_tpu.eager_mode("strict"):
        strict_losses, strict_params = train("tpu", 4)
    cpu_losses, cpu_params = train("cpu", 4)
    torch.testing.assert_close(fused_losses, strict_losses, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fused_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    fused_params, strict_params, cpu_params = map(without_key_bias, (fused_params, strict_params, cpu_params))
    for n in fused_params:
        torch.testing.assert_close(fused_params[n], strict_params[n], rtol=1e-5, atol=1e-6, msg=n)
        torch.testing.assert_close(fused_params[n], cpu_params[n], rtol=1e-4, atol=1e-5, msg=n)
    assert torch_tpu.fallback_ops() == {}
