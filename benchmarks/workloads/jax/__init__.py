"""JAX versions of the workloads: the same math, dims, initial values and AdamW
update as workloads/torch, as pure functions jitted whole (forward, backward and
optimizer update in one program; the decode step with its cache donated).
Each module has build() -> Workload."""
import importlib

import jax
import jax.numpy as jnp
import numpy as np

from .. import init


class Workload:
    """`step()` runs one jitted step on the current state and returns the outputs
    to wait on; `check(out)` is the scalar compared across engines."""

    def __init__(self, fn, state, batch, check_of):
        self.fn, self.state, self.batch, self.check = fn, state, batch, check_of

    def step(self):
        self.state, out = self.fn(self.state, *self.batch)
        return out


def params(shapes):
    """{torch parameter name: shape} -> {name: jnp array} with the shared init."""
    return {name: jnp.asarray(init.param(name, shape)) for name, shape in shapes.items()}


def linear(p, name, x, bias=True):
    """torch.nn.Linear: weight [out, in]."""
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if bias else y


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[:, None], axis=-1).mean()


def layer_norm(p, name, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p[name + ".weight"] + p[name + ".bias"]


def adamw_init(p):
    # m and v get buffers of their own: the whole state is donated to the step.
    zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, p)
    return {"step": jnp.zeros((), jnp.float32), "m": zeros(), "v": zeros()}


def adamw_update(p, grads, opt):
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected)."""
    (b1, b2), lr = init.BETAS, init.LR
    step = opt["step"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step

    def update(w, m, v):
        w = w * (1 - lr * init.WEIGHT_DECAY)
        return w - (lr / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + init.EPS)

    return jax.tree_util.tree_map(update, p, m, v), {"step": step, "m": m, "v": v}


def training(loss_fn, shapes, batch):
    """A jitted train step (loss, grads, AdamW) over state (params, opt state)."""
    def train_step(state, *batch):
        p, opt = state
        loss, grads = jax.value_and_grad(loss_fn)(p, *batch)
        p, opt = adamw_update(p, grads, opt)
        return (p, opt), loss

    p = params(shapes)
    return Workload(jax.jit(train_step, donate_argnums=0), (p, adamw_init(p)),
                    tuple(jnp.asarray(b) for b in batch), check_of=lambda out: out)


def build(name):
    return importlib.import_module(f"{__name__}.{name}").build()
