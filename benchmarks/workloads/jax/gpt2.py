"""(b) GPT-2 training step in JAX: see workloads/torch/gpt2.py."""
import math

import jax
import jax.numpy as jnp

from .. import dims, init
from . import cross_entropy, layer_norm, linear, training


def attention(p, name, x, heads):
    b, t, c = x.shape
    hd = c // heads
    q, k, v = jnp.split(linear(p, name + ".c_attn", x), 3, axis=2)
    q, k, v = (z.reshape(b, t, heads, hd).transpose(0, 2, 1, 3) for z in (q, k, v))
    att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))
    causal = jnp.tril(jnp.ones((t, t), bool))
    att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
    return linear(p, name + ".c_proj", y)


def forward(D, p, idx):
    x = p["wte.weight"][idx] + p["wpe.weight"][jnp.arange(idx.shape[1])]
    for i in range(D.LAYERS):
        h = f"h.{i}"
        x = x + attention(p, h + ".attn", layer_norm(p, h + ".ln_1", x), D.HEADS)
        m = jax.nn.gelu(linear(p, h + ".mlp.c_fc", layer_norm(p, h + ".ln_2", x)), approximate=False)
        x = x + linear(p, h + ".mlp.c_proj", m)
    return layer_norm(p, "ln_f", x) @ p["wte.weight"].T


def build_sized(D, name):
    """The training step of a GPT-2 of sizes `D`; its tokens are init's `<name>.tokens`."""
    def loss_fn(p, idx, targets):
        return cross_entropy(forward(D, p, idx).reshape(-1, D.VOCAB), targets.reshape(-1))

    e = D.EMBD
    shapes = {"wte.weight": (D.VOCAB, e), "wpe.weight": (D.CTX, e), "ln_f.weight": (e,), "ln_f.bias": (e,)}
    for i in range(D.LAYERS):
        for ln in ("ln_1", "ln_2"):
            shapes[f"h.{i}.{ln}.weight"], shapes[f"h.{i}.{ln}.bias"] = (e,), (e,)
        for lin, (n_in, n_out) in {"attn.c_attn": (e, 3 * e), "attn.c_proj": (e, e),
                                   "mlp.c_fc": (e, 4 * e), "mlp.c_proj": (4 * e, e)}.items():
            shapes[f"h.{i}.{lin}.weight"], shapes[f"h.{i}.{lin}.bias"] = (n_out, n_in), (n_out,)
    tokens = init.integers(f"{name}.tokens", (D.BATCH, D.CTX + 1), D.VOCAB)
    return training(loss_fn, shapes, (tokens[:, :-1], tokens[:, 1:]))


def build():
    return build_sized(dims.gpt2, "gpt2")
