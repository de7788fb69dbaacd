"""(c) Llama decode step in JAX: see workloads/torch/llama_decode.py. The KV
caches are donated to the jitted step and written with dynamic_update_slice,
XLA's in-place update."""
import jax
import jax.numpy as jnp

from .. import dims, init
from . import Workload, linear, params

D = dims.llama_decode


def rms_norm(x, weight):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + D.NORM_EPS) * weight


def rope(x, cos, sin):
    x1, x2 = x[..., : D.HEAD_DIM // 2], x[..., D.HEAD_DIM // 2:]
    return jnp.concatenate((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)


def rope_tables():
    freqs = 1.0 / D.ROPE_THETA ** (jnp.arange(0, D.HEAD_DIM, 2, dtype=jnp.float32) / D.HEAD_DIM)
    angles = jnp.outer(jnp.arange(D.MAX_SEQ, dtype=jnp.float32), freqs)
    return jnp.cos(angles), jnp.sin(angles)


def attention(p, name, x, k_cache, v_cache, pos, cos, sin, valid):
    b, hd = x.shape[0], D.HEAD_DIM
    q = linear(p, name + ".wq", x, bias=False).reshape(b, 1, D.HEADS, hd).transpose(0, 2, 1, 3)
    k = linear(p, name + ".wk", x, bias=False).reshape(b, 1, D.KV_HEADS, hd).transpose(0, 2, 1, 3)
    v = linear(p, name + ".wv", x, bias=False).reshape(b, 1, D.KV_HEADS, hd).transpose(0, 2, 1, 3)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    k_cache = jax.lax.dynamic_update_slice(k_cache, k, (0, 0, pos, 0))
    v_cache = jax.lax.dynamic_update_slice(v_cache, v, (0, 0, pos, 0))
    rep = D.HEADS // D.KV_HEADS
    keys = jnp.repeat(k_cache, rep, axis=1)  # kv head j serves query heads j*rep .. j*rep+rep-1
    values = jnp.repeat(v_cache, rep, axis=1)
    scores = (q @ keys.transpose(0, 1, 3, 2)) * hd ** -0.5
    scores = jax.nn.softmax(jnp.where(valid, scores, -jnp.inf), axis=-1)
    out = linear(p, name + ".wo", (scores @ values).transpose(0, 2, 1, 3).reshape(b, 1, D.DIM), bias=False)
    return out, k_cache, v_cache


def decode_step(state, p, cos_table, sin_table):
    caches, tokens, pos = state
    x = p["tok_embeddings.weight"][tokens]
    cos = jax.lax.dynamic_slice_in_dim(cos_table, pos, 1)
    sin = jax.lax.dynamic_slice_in_dim(sin_table, pos, 1)
    valid = jnp.arange(D.MAX_SEQ) <= pos
    new_caches = []
    for i, (k_cache, v_cache) in enumerate(caches):
        name = f"layers.{i}"
        h, k_cache, v_cache = attention(p, name + ".attention", rms_norm(x, p[name + ".attention_norm"]),
                                        k_cache, v_cache, pos, cos, sin, valid)
        x = x + h
        f = rms_norm(x, p[name + ".ffn_norm"])
        ff = name + ".feed_forward"
        f = jax.nn.silu(linear(p, ff + ".w1", f, bias=False)) * linear(p, ff + ".w3", f, bias=False)
        x = x + linear(p, ff + ".w2", f, bias=False)
        new_caches.append((k_cache, v_cache))
    logits = linear(p, "output", rms_norm(x, p["norm"]), bias=False)[:, 0]
    next_tokens = jnp.argmax(logits, -1)[:, None]
    return (tuple(new_caches), next_tokens, (pos + 1) % D.MAX_SEQ), logits


def build():
    shapes = {"tok_embeddings.weight": (D.VOCAB, D.DIM), "norm": (D.DIM,), "output.weight": (D.VOCAB, D.DIM)}
    for i in range(D.LAYERS):
        n = f"layers.{i}"
        shapes[n + ".attention_norm"] = shapes[n + ".ffn_norm"] = (D.DIM,)
        shapes[n + ".attention.wq.weight"] = (D.HEADS * D.HEAD_DIM, D.DIM)
        shapes[n + ".attention.wk.weight"] = shapes[n + ".attention.wv.weight"] = (D.KV_HEADS * D.HEAD_DIM, D.DIM)
        shapes[n + ".attention.wo.weight"] = (D.DIM, D.HEADS * D.HEAD_DIM)
        shapes[n + ".feed_forward.w1.weight"] = shapes[n + ".feed_forward.w3.weight"] = (D.FFN, D.DIM)
        shapes[n + ".feed_forward.w2.weight"] = (D.DIM, D.FFN)
    cache_shape = (D.BATCH, D.KV_HEADS, D.MAX_SEQ, D.HEAD_DIM)
    caches = tuple((jnp.zeros(cache_shape), jnp.zeros(cache_shape)) for _ in range(D.LAYERS))
    tokens = jnp.asarray(init.integers("llama.tokens", (D.BATCH, 1), D.VOCAB).astype("int32"))
    state = (caches, tokens, jnp.zeros((), jnp.int32))
    cos, sin = rope_tables()
    return Workload(jax.jit(decode_step, donate_argnums=0), state, (params(shapes), cos, sin),
                    check_of=lambda out: out.sum())
