"""Autograd and training: an MLP and a small transformer train with AdamW on
tpu, matching the CPU step for step, with zero CPU fallbacks."""
import copy

import pytest
import torch
import torch.nn as nn
import torch_tpu


def train(model, data, target, device, steps, loss_fn):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data, target = data.to(device), target.to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def test_mlp_matches_cpu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    cpu, _ = train(model, x, y, "cpu", 20, nn.functional.mse_loss)
    tpu, _ = train(model, x, y, "tpu", 20, nn.functional.mse_loss)
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=1e-5)
    assert tpu[-1] < tpu[0]
    assert torch_tpu.fallback_ops() == {}


def test_classifier_cross_entropy_matches_cpu():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(10, 32), nn.SiLU(), nn.LayerNorm(32), nn.Dropout(0.0), nn.Linear(32, 5))
    x, y = torch.randn(32, 10), torch.randint(0, 5, (32,))
    cpu, _ = train(model, x, y, "cpu", 20, nn.functional.cross_entropy)
    tpu, _ = train(model, x, y, "tpu", 20, nn.functional.cross_entropy)
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=1e-5)
    assert torch_tpu.fallback_ops() == {}


class TinyTransformer(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens)))


def test_transformer_matches_cpu():
    torch.manual_seed(2)
    model = TinyTransformer()
    tokens = torch.randint(0, 50, (4, 12))
    target = torch.randint(0, 50, (4, 12))
    loss_fn = lambda logits, t: nn.functional.cross_entropy(logits.reshape(-1, 50), t.reshape(-1))  # noqa: E731
    cpu, _ = train(model, tokens, target, "cpu", 20, loss_fn)
    tpu, _ = train(model, tokens, target, "tpu", 20, loss_fn)
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=2e-4, atol=2e-5)
    assert tpu[-1] < tpu[0]
    assert torch_tpu.fallback_ops() == {}


def test_no_leak_over_1000_steps():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 8, device="tpu"), torch.randn(32, 1, device="tpu")

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    for _ in range(5):  # optimizer state gets allocated
        step()
    torch.tpu.synchronize()
    baseline = torch.tpu.memory_allocated()
    for _ in range(1000):
        step()
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == baseline
