"""(b) GPT-2 training step, small config: pre-LayerNorm blocks, causal
multi-head attention written out (matmul, mask, softmax), GELU MLP, tied input
and output embeddings; next-token cross-entropy, AdamW."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import dims, init
from . import Workload, adamw, load_init, tensor, train_step_fn

D = dims.gpt2
BATCH, CTX, VOCAB, EMBD, LAYERS, HEADS = D.BATCH, D.CTX, D.VOCAB, D.EMBD, D.LAYERS, D.HEADS


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(EMBD, 3 * EMBD)
        self.c_proj = nn.Linear(EMBD, EMBD)
        self.register_buffer("causal", torch.ones(CTX, CTX, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(EMBD, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(EMBD, 4 * EMBD)
        self.c_proj = nn.Linear(4 * EMBD, EMBD)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(EMBD), Attention()
        self.ln_2, self.mlp = nn.LayerNorm(EMBD), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, EMBD)
        self.wpe = nn.Embedding(CTX, EMBD)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(EMBD)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied output embedding


def loss_fn(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def build(device):
    model = load_init(GPT2()).to(device)
    tokens = init.integers("gpt2.tokens", (BATCH, CTX + 1), VOCAB)
    idx, targets = tensor(tokens[:, :-1], device), tensor(tokens[:, 1:], device)
    return Workload(train_step_fn(model, adamw(model), loss_fn), (idx, targets))
