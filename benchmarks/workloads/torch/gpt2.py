"""(b) GPT-2 training step, small config: pre-LayerNorm blocks, causal
multi-head attention written out (matmul, mask, softmax), GELU MLP, tied input
and output embeddings; next-token cross-entropy, AdamW. The modules take their
sizes from a dims class `D` (gpt_100m.py builds the same model larger)."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import dims, init
from . import Workload, adamw, load_init, tensor, train_step_fn



class Attention(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.heads = D.HEADS
        self.c_attn = nn.Linear(D.EMBD, 3 * D.EMBD)
        self.c_proj = nn.Linear(D.EMBD, D.EMBD)
        self.register_buffer("causal", torch.ones(D.CTX, D.CTX, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.c_fc = nn.Linear(D.EMBD, 4 * D.EMBD)
        self.c_proj = nn.Linear(4 * D.EMBD, D.EMBD)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(D.EMBD), Attention(D)
        self.ln_2, self.mlp = nn.LayerNorm(D.EMBD), MLP(D)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.wte = nn.Embedding(D.VOCAB, D.EMBD)
        self.wpe = nn.Embedding(D.CTX, D.EMBD)
        self.h = nn.ModuleList(Block(D) for _ in range(D.LAYERS))
        self.ln_f = nn.LayerNorm(D.EMBD)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied output embedding


def loss_fn(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def build_sized(D, name, device):
    """The training step of a GPT-2 of sizes `D`; its tokens are init's `<name>.tokens`."""
    model = load_init(GPT2(D)).to(device)
    tokens = init.integers(f"{name}.tokens", (D.BATCH, D.CTX + 1), D.VOCAB)
    idx, targets = tensor(tokens[:, :-1], device), tensor(tokens[:, 1:], device)
    return Workload(train_step_fn(model, adamw(model), loss_fn), (idx, targets))


def build(device):
    return build_sized(dims.gpt2, "gpt2", device)
