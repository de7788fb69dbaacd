"""Train a small GPT-2 on a public-domain text, byte-level, on `tpu`.

    python examples/train_gpt2.py                     # 500 steps on tpu, writes out/loss.png
    python examples/train_gpt2.py --device cpu --steps 50 --out /tmp/gpt2

The model is GPT-2's architecture in plain PyTorch (pre-norm blocks, causal
self-attention, GELU MLP, learned positions, tied input/output embedding),
scaled down. Tokens are the text's UTF-8 bytes (vocabulary 256). Batches are
drawn by a seeded CPU generator and dropout is off, so a tpu run and a cpu run
see the same data and start from the same weights (initialised on the CPU).
"""
import argparse
import math
import os
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_tpu  # noqa: F401  (PyTorch autoloads it when installed; imported before any backward, which
#                   sizes autograd's per-device queues on first use)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "declaration_of_independence.txt")


@dataclass
class Config:
    vocab: int = 256
    block: int = 64      # context length
    layers: int = 2
    heads: int = 4
    dim: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = c.heads
        self.qkv = nn.Linear(c.dim, 3 * c.dim)
        self.proj = nn.Linear(c.dim, c.dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.dim), nn.LayerNorm(c.dim)
        self.attn = CausalSelfAttention(c)
        self.mlp = nn.Sequential(nn.Linear(c.dim, 4 * c.dim), nn.GELU(approximate="tanh"), nn.Linear(4 * c.dim, c.dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok = nn.Embedding(c.vocab, c.dim)
        self.pos = nn.Embedding(c.block, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def load_text(path=DATA):
    with open(path, "rb") as f:
        return torch.tensor(list(f.read()), dtype=torch.long)


def batches(data, block, batch_size, seed):
    """Random windows of the text, drawn on the CPU so every device sees the same ones."""
    g = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(data) - block - 1, (batch_size,), generator=g)
        x = torch.stack([data[s:s + block] for s in starts])
        y = torch.stack([data[s + 1:s + block + 1] for s in starts])
        yield x, y


def train(device="tpu", steps=300, batch_size=16, lr=3e-3, seed=0, config=None, progress=True):
    """Returns the loss of every step (floats) and the trained model."""
    from tqdm import tqdm

    c = config or Config()
    torch.manual_seed(seed)
    model = GPT2(c).to(device)  # weights drawn on the CPU, then moved: same start on every device
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))  # warm-up
    data = batches(load_text(), c.block, batch_size, seed)
    losses = []
    bar = tqdm(range(steps), desc=f"gpt2 on {device}", disable=not progress)
    for _ in bar:
        x, y = next(data)
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses, model


@torch.no_grad()
def sample(model, prompt, n, device):
    """Greedy continuation. The window is always `block` bytes (left-padded with
    spaces), so every step reuses one compiled program instead of one per length."""
    block = model.c.block
    idx = torch.tensor([[32] * block + list(prompt.encode())], dtype=torch.long, device=device)
    for _ in range(n):
        logits = model(idx[:, -block:])[:, -1]
        idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    return bytes(idx[0, block:].cpu().tolist()).decode("utf-8", errors="replace")


def save_curve(losses, path, device):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(1, len(losses) + 1), losses, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / byte)")
    ax.set_title(f"GPT-2 (byte-level) on {device}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="tpu", help="tpu, tpu:1, cpu, ... (default tpu)")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--out", default="out", help="folder for loss.png and losses.txt (default ./out)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.steps < 1:
        p.error("--steps must be at least 1")

    t0 = time.perf_counter()
    losses, model = train(a.device, a.steps, a.batch_size, a.lr, a.seed)
    secs = time.perf_counter() - t0
    os.makedirs(a.out, exist_ok=True)
    png = os.path.join(a.out, "loss.png")
    save_curve(losses, png, a.device)
    with open(os.path.join(a.out, "losses.txt"), "w") as f:
        f.write("\n".join(f"{x:.6f}" for x in losses) + "\n")
    print(f"{a.steps} steps on {a.device} in {secs:.1f} s: loss {losses[0]:.3f} -> {losses[-1]:.3f}; curve: {png}")
    print("sample:", repr(sample(model, "We hold these truths", 60, a.device)))
    if a.device.startswith("tpu"):
        print("cache:", torch_tpu.cache_info(), "fallbacks:", torch_tpu.fallback_ops() or "none")


if __name__ == "__main__":
    main()
