"""(a) MLP training step in JAX: see workloads/torch/mlp.py."""
import jax

from .. import dims, init
from . import cross_entropy, linear, training


def loss_fn(p, x, y):
    n = len(dims.mlp.SIZES) - 1
    for i in range(n - 1):
        x = jax.nn.gelu(linear(p, f"layers.{i}", x), approximate=False)
    return cross_entropy(linear(p, f"layers.{n - 1}", x), y)


def build():
    sizes = dims.mlp.SIZES
    shapes = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        shapes[f"layers.{i}.weight"], shapes[f"layers.{i}.bias"] = (b, a), (b,)
    x = init.normal("mlp.x", (dims.mlp.BATCH, sizes[0]))
    y = init.integers("mlp.y", (dims.mlp.BATCH,), sizes[-1])
    return training(loss_fn, shapes, (x, y))
