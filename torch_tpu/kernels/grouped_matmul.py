"""Grouped matmul: megablox's Pallas TPU kernels
(jax.experimental.pallas.ops.tpu.megablox) as the two external ops
torch._grouped_mm's rule calls (csrc/lowering/ops/grouped_mm.cpp):

    tpu_kernels::grouped_matmul(a (M, K), w (G, K, N), offs (G,) int32) -> (M, N)
        rows [offs[g-1], offs[g]) of a times w[g]; rows past offs[G-1] are zeros
    tpu_kernels::grouped_matmul_contraction(a (M, K), w (K, N), offs) -> (G, M, N)
        a's columns and w's rows [offs[g-1], offs[g]) multiplied for each g

Mixture-of-experts layers call the first (experts over their tokens) and its
backward both (the input's gradient is the first again, the weights' the
second). offs are cumulative group ends that never decrease. Products
accumulate in float32 and round once to the inputs' dtype. Tiles are 128
along each dimension by default (blocks.py; the tuner tries larger; the
rule checks that 128 tiles every dimension).
"""
import functools
import importlib

import jax
import jax.numpy as jnp

from torch_tpu._internal.pallas import jax_op

from . import blocks

# megablox/__init__ exports gmm and tgmm with their own gradients; the
# kernels themselves are in the module of the same name.
_gmm = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")


def _sizes(offs):
    return jnp.maximum(jnp.diff(offs, prepend=jnp.zeros((1,), offs.dtype)), 0).astype(jnp.int32)


def _tiling(*dims):
    return tuple(blocks.block_for("grouped_mm_tile", d) for d in dims)


def _rows(a: jax.Array, w: jax.Array, offs: jax.Array) -> jax.Array:
    m, k = a.shape
    n = w.shape[2]
    out = _gmm.gmm(a, w, _sizes(offs), preferred_element_type=jnp.float32, tiling=_tiling(m, k, n))
    kept = (jnp.arange(m) < offs[-1])[:, None]
    return jnp.where(kept, out, 0).astype(a.dtype)


def _contraction(a: jax.Array, w: jax.Array, offs: jax.Array) -> jax.Array:
    m, k = a.shape
    n = w.shape[1]
    out = _gmm.tgmm(a, w, _sizes(offs), preferred_element_type=jnp.float32, tiling=_tiling(m, k, n),
                    num_actual_groups=offs.shape[0])
    return out.astype(a.dtype)


@functools.cache
def register():
    """Registers the two external ops (once); returns them."""
    return (jax_op("tpu_kernels::grouped_matmul", _rows),
            jax_op("tpu_kernels::grouped_matmul_contraction", _contraction))
