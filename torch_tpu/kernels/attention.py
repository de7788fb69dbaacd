"""Flash attention: JAX's Pallas TPU kernel
(jax.experimental.pallas.ops.tpu.flash_attention) as the two external ops
SDPA's rules call (csrc/lowering/ops/attention_kernel.cpp):

    tpu_kernels::flash_attention_forward(q, k, v, causal, scale) -> (out, logsumexp)
    tpu_kernels::flash_attention_backward(dout, q, k, v, out, logsumexp, causal, scale) -> (dq, dk, dv)

q, k, v are (B, H, L|S, E) with as many key heads as query heads. The
forward keeps the kernel's residuals as PyTorch's logsumexp (m + log l); the
backward hands the kernel m = logsumexp and l = 1, which gives it the same
softmax (exp(s - m) / l). The kernel works in blocks of 128 queries and
keys by default (blocks.py; the tuner tries larger), so L and S are
multiples of 128 (SDPA's automatic choice checks it). The kernel's own entry points (`_flash_attention_impl`,
`_flash_attention_bwd_dkv`, `_flash_attention_bwd_dq`) are JAX's private
functions, pinned with jax in requirements-jax.txt.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import flash_attention as _fa

from torch_tpu._internal.pallas import jax_op

from . import blocks


def _block(n: int) -> int:
    return blocks.block_for("flash_attention_block", n)


def _forward(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool, scale: float) -> tuple[jax.Array, jax.Array]:
    bq, bk = _block(q.shape[2]), _block(k.shape[2])
    out, l, m = _fa._flash_attention_impl(q, k, v, None, None, True, causal, scale, 1, bq, bk, bk, False)
    return out, (m + jnp.log(l)).astype(jnp.float32)


def _backward(dout: jax.Array, q: jax.Array, k: jax.Array, v: jax.Array, out: jax.Array, lse: jax.Array,
              causal: bool, scale: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    bq, bk = _block(q.shape[2]), _block(k.shape[2])
    di = jnp.sum(out.astype(jnp.float32) * dout.astype(jnp.float32), axis=-1)
    m, l = lse, jnp.ones_like(lse)
    dk, dv = _fa._flash_attention_bwd_dkv(q, k, v, None, None, l, m, dout, di, block_q_major=bq, block_q=bq,
                                          block_k_major=bk, block_k=bk, sm_scale=scale, causal=causal,
                                          mask_value=_fa.DEFAULT_MASK_VALUE, debug=False)
    dq, _ = _fa._flash_attention_bwd_dq(q, k, v, None, None, l, m, dout, di, block_q_major=bq, block_k_major=bk,
                                        block_k=bk, sm_scale=scale, causal=causal,
                                        mask_value=_fa.DEFAULT_MASK_VALUE, debug=False)
    return dq, dk, dv


@functools.cache
def register():
    """Registers the two external ops (once); returns them."""
    return (jax_op("tpu_kernels::flash_attention_forward", _forward),
            jax_op("tpu_kernels::flash_attention_backward", _backward))
