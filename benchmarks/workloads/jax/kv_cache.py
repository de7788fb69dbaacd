"""(e) The KV-cache decode step in JAX: see workloads/torch/kv_cache.py. The
caches are donated to the jitted step and written with dynamic_update_slice."""
import jax
import jax.numpy as jnp

from .. import dims, init
from . import Workload, linear, params

D = dims.kv_cache


def decode_step(state, p):
    (k_cache, v_cache), x, pos = state
    q, k, v = (linear(p, n, x, bias=False) for n in ("wq", "wk", "wv"))
    k_cache = jax.lax.dynamic_update_slice(k_cache, k, (0, pos, 0))
    v_cache = jax.lax.dynamic_update_slice(v_cache, v, (0, pos, 0))
    scores = (q @ k_cache.transpose(0, 2, 1)) * D.DIM ** -0.5
    scores = jax.nn.softmax(jnp.where(jnp.arange(D.MAX_SEQ) <= pos, scores, -jnp.inf), axis=-1)
    out = scores @ v_cache
    return ((k_cache, v_cache), out, (pos + 1) % D.MAX_SEQ), out


def build():
    shapes = {n + ".weight": (D.DIM, D.DIM) for n in ("wq", "wk", "wv")}
    cache = (D.BATCH, D.MAX_SEQ, D.DIM)
    x = jnp.asarray(init.normal("kv_cache.x", (D.BATCH, 1, D.DIM)))
    state = ((jnp.zeros(cache), jnp.zeros(cache)), x, jnp.zeros((), jnp.int32))
    return Workload(jax.jit(decode_step, donate_argnums=0), state, (params(shapes),),
                    check_of=lambda out: out.sum())
