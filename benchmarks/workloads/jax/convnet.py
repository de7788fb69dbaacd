"""(d) Small conv net training step in JAX: see workloads/torch/convnet.py."""
import jax
import jax.numpy as jnp

from .. import dims, init
from . import cross_entropy, linear, training

D = dims.convnet


def conv_relu_pool(p, name, x):
    y = jax.lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = jax.nn.relu(y + p[name + ".bias"][None, :, None, None])
    return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def loss_fn(p, x, y):
    x = conv_relu_pool(p, "conv2", conv_relu_pool(p, "conv1", x))
    return cross_entropy(linear(p, "fc", x.reshape(x.shape[0], -1)), y)


def build():
    c = D.CHANNELS
    shapes = {"conv1.weight": (c[1], c[0], 3, 3), "conv1.bias": (c[1],),
              "conv2.weight": (c[2], c[1], 3, 3), "conv2.bias": (c[2],),
              "fc.weight": (D.CLASSES, c[2] * (D.IMAGE // 4) ** 2), "fc.bias": (D.CLASSES,)}
    x = init.normal("convnet.x", (D.BATCH, c[0], D.IMAGE, D.IMAGE))
    y = init.integers("convnet.y", (D.BATCH,), D.CLASSES)
    return training(loss_fn, shapes, (x, y))
