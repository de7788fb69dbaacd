"""(c) Llama decode step, small config, batch of sequences one token at a time:
RMSNorm, rotary position embeddings, grouped-query attention over a
preallocated static KV cache updated in place (index_copy_ at the current
position), SwiGLU MLP. The step feeds its greedy next token and position back
in, so the timed loop is real autoregressive decoding; every shape is static
(attention always spans the whole cache, masked past the position), which is
what a compiler needs to compile the step once."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import dims, init
from . import Workload, load_init, tensor

D = dims.llama_decode
BATCH, MAX_SEQ, VOCAB, DIM, LAYERS = D.BATCH, D.MAX_SEQ, D.VOCAB, D.DIM, D.LAYERS
HEADS, KV_HEADS, FFN, ROPE_THETA, NORM_EPS = D.HEADS, D.KV_HEADS, D.FFN, D.ROPE_THETA, D.NORM_EPS
HEAD_DIM = D.HEAD_DIM


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * weight


def rope(x, cos, sin):
    """Rotate the two halves of each head: x is [b, heads, 1, head_dim]."""
    x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wo = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)
        self.register_buffer("k_cache", torch.zeros(BATCH, KV_HEADS, MAX_SEQ, HEAD_DIM), persistent=False)
        self.register_buffer("v_cache", torch.zeros(BATCH, KV_HEADS, MAX_SEQ, HEAD_DIM), persistent=False)

    def forward(self, x, pos, cos, sin, valid):
        b = x.shape[0]
        q = self.wq(x).view(b, 1, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.wk(x).view(b, 1, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.wv(x).view(b, 1, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)  # the in-place cache write
        self.v_cache.index_copy_(2, pos, v)
        rep = HEADS // KV_HEADS  # each kv head serves `rep` query heads
        keys = self.k_cache[:, :, None].expand(b, KV_HEADS, rep, MAX_SEQ, HEAD_DIM).reshape(b, HEADS, MAX_SEQ, HEAD_DIM)
        values = self.v_cache[:, :, None].expand(b, KV_HEADS, rep, MAX_SEQ, HEAD_DIM).reshape(b, HEADS, MAX_SEQ, HEAD_DIM)
        scores = (q @ keys.transpose(-2, -1)) * HEAD_DIM ** -0.5  # [b, heads, 1, MAX_SEQ]
        scores = scores.masked_fill(~valid, float("-inf")).softmax(dim=-1)
        return self.wo((scores @ values).transpose(1, 2).reshape(b, 1, DIM))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.Parameter(torch.ones(DIM))
        self.attention = Attention()
        self.ffn_norm = nn.Parameter(torch.ones(DIM))
        self.feed_forward = FeedForward()

    def forward(self, x, pos, cos, sin, valid):
        x = x + self.attention(rms_norm(x, self.attention_norm), pos, cos, sin, valid)
        return x + self.feed_forward(rms_norm(x, self.ffn_norm))


def rope_tables():
    freqs = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)
    angles = torch.outer(torch.arange(MAX_SEQ, dtype=torch.float32), freqs)  # [MAX_SEQ, HEAD_DIM/2]
    return angles.cos(), angles.sin()


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = nn.Parameter(torch.ones(DIM))
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        cos, sin = rope_tables()
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.register_buffer("positions", torch.arange(MAX_SEQ), persistent=False)

    def forward(self, tokens, pos):
        """tokens [b, 1] int64, pos [1] int64 -> logits [b, VOCAB]."""
        x = self.tok_embeddings(tokens)
        cos, sin = self.rope_cos.index_select(0, pos), self.rope_sin.index_select(0, pos)
        valid = self.positions <= pos  # cache slots written so far, this one included
        for layer in self.layers:
            x = layer(x, pos, cos, sin, valid)
        return self.output(rms_norm(x, self.norm))[:, 0]


def build(device):
    model = load_init(Llama()).to(device).requires_grad_(False)

    def decode_step(tokens, pos):
        logits = model(tokens, pos)
        next_tokens = logits.argmax(-1, keepdim=True)
        return logits, next_tokens, (pos + 1) % MAX_SEQ

    tokens = tensor(init.integers("llama.tokens", (BATCH, 1), VOCAB), device)
    pos = torch.zeros(1, dtype=torch.int64, device=device)
    return Workload(decode_step, (tokens, pos), carry=lambda out: out[1:], check_of=lambda out: out[0].sum())
