"""(e) A decode step over a realistic static KV cache: one attention layer whose
two caches ([batch, 2048, 512], 32 MiB each in float32) are written in place
with index_copy_ at the current position and then read whole (masked past the
position). What the step costs beyond its math is what it does to the caches:
a backend that cannot update them in place copies 64 MiB per step."""
import torch
from torch import nn

from .. import dims, init
from . import Workload, load_init, tensor

D = dims.kv_cache


class CachedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(D.DIM, D.DIM, bias=False)
        self.wk = nn.Linear(D.DIM, D.DIM, bias=False)
        self.wv = nn.Linear(D.DIM, D.DIM, bias=False)
        self.register_buffer("k_cache", torch.zeros(D.BATCH, D.MAX_SEQ, D.DIM), persistent=False)
        self.register_buffer("v_cache", torch.zeros(D.BATCH, D.MAX_SEQ, D.DIM), persistent=False)
        self.register_buffer("positions", torch.arange(D.MAX_SEQ), persistent=False)

    def forward(self, x, pos):
        """x [b, 1, DIM], pos [1] int64 -> the attention output [b, 1, DIM]."""
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        self.k_cache.index_copy_(1, pos, k)
        self.v_cache.index_copy_(1, pos, v)
        scores = (q @ self.k_cache.transpose(1, 2)) * D.DIM ** -0.5  # [b, 1, MAX_SEQ]
        scores = scores.masked_fill(~(self.positions <= pos), float("-inf")).softmax(-1)
        return scores @ self.v_cache


def build(device):
    model = load_init(CachedAttention()).to(device).requires_grad_(False)

    def decode_step(x, pos):
        out = model(x, pos)
        return out, (pos + 1) % D.MAX_SEQ

    x = tensor(init.normal("kv_cache.x", (D.BATCH, 1, D.DIM)), device)
    pos = torch.zeros(1, dtype=torch.int64, device=device)
    # The output feeds the next step, as a decoder's hidden state would.
    return Workload(decode_step, (x, pos), carry=lambda out: out, check_of=lambda out: out[0].sum())
