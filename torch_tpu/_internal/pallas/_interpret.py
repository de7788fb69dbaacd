"""Pallas kernels off TPU: Pallas' interpret lowering, chosen for the kernel.

A `pallas_call` lowers to Mosaic (a `tpu_custom_call` only libtpu runs) unless
it is interpreted. Pallas' plain interpret lowering (`interpret=True`) turns
the kernel into a loop over its grid in ordinary StableHLO, which every PJRT
plugin runs. Kernel libraries (Helion's Pallas backend, tokamax, HF kernels)
build their kernels for TPU and do not pass `interpret=True`, so on a plugin
that is not TPU the bridge exports a function whose Pallas kernels asked for
no interpret mode with that flag set on each of them.

Two places hold the flag, and both are covered:
- kernels built while the function is traced read JAX's scoped switch
  (`jax._src.config.pallas_tpu_interpret_mode_context_manager`, the one
  `pltpu.force_tpu_interpret_mode` sets; it is part of JAX's jit cache key,
  so setting it cannot leak into a trace made outside the export);
- kernels built before (Helion builds its `pl.kernel` once, then jits it)
  carry `interpret=False` in their `pallas_call` / `mpmd_map` equation; the
  traced jaxpr is rewritten with `interpret=True` on those equations.

The flag is `True`, not TPU interpret parameters: the TPU interpreter
simulates memory spaces through host callbacks, which `jax.export` cannot
serialize.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

# Primitives that carry a Pallas kernel and an `interpret` parameter.
_PALLAS_PRIMITIVES = frozenset({"pallas_call", "mpmd_map"})


def _switch():
    from jax._src import config
    return config.pallas_tpu_interpret_mode_context_manager


@contextlib.contextmanager
def pallas_as_stablehlo(enabled: bool):
    """Within the block, every Pallas kernel built uses the plain interpret
    lowering, unless the caller already chose an interpret mode."""
    switch = _switch()
    if not enabled or switch.value is not None:
        yield
        return
    prev = switch.swap_local(True)
    try:
        yield
    finally:
        switch.set_local(prev)


def _rewrite_value(v):
    """`v` with its jaxprs rewritten, and whether anything changed."""
    from jax._src import core
    if isinstance(v, core.ClosedJaxpr):
        j, changed = _rewrite_jaxpr(v.jaxpr)
        return (v.replace(jaxpr=j), True) if changed else (v, False)
    if isinstance(v, core.Jaxpr):
        return _rewrite_jaxpr(v)
    if isinstance(v, tuple) and any(isinstance(x, (core.ClosedJaxpr, core.Jaxpr)) for x in v):
        pairs = [_rewrite_value(x) for x in v]
        if any(c for _, c in pairs):
            return tuple(x for x, _ in pairs), True
    return v, False


def _rewrite_jaxpr(jaxpr):
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        params = dict(eqn.params)
        touched = False
        if eqn.primitive.name in _PALLAS_PRIMITIVES and "interpret" in params and not params["interpret"]:
            params["interpret"] = True
            touched = True
        else:
            for k, v in eqn.params.items():
                nv, c = _rewrite_value(v)
                if c:
                    params[k] = nv
                    touched = True
        eqns.append(eqn.replace(params=params) if touched else eqn)
        changed |= touched
    return (jaxpr.replace(eqns=eqns) if changed else jaxpr), changed


def interpreted(jit_fn, args: Sequence[Any], kwargs: dict, static_argnums: Sequence[int],
                donate_argnums: Sequence[int]):
    """(function, its arguments) to export in place of `jit_fn(*args,
    **kwargs)`: the same function, with every Pallas kernel that asked for
    no interpret mode set to interpret. Returns None when it has no such
    kernel (export `jit_fn` itself). The function takes the non-static
    arguments in order and donates those of `donate_argnums`."""
    import jax
    from jax._src import core

    static = set(static_argnums)
    dynamic = [i for i in range(len(args)) if i not in static]

    def call(*values):
        full = list(args)
        for i, v in zip(dynamic, values):
            full[i] = v
        return jit_fn(*full, **kwargs)

    closed, out_shape = jax.make_jaxpr(call, return_shape=True)(*[args[i] for i in dynamic])
    jaxpr, changed = _rewrite_jaxpr(closed.jaxpr)
    if not changed:
        return None
    out_tree = jax.tree_util.tree_structure(out_shape)
    consts = closed.consts

    def run(*values):
        flat = jax.tree_util.tree_leaves(values)
        return jax.tree_util.tree_unflatten(out_tree, core.eval_jaxpr(jaxpr, consts, *flat))

    donate = tuple(dynamic.index(i) for i in donate_argnums if i in dynamic)
    return jax.jit(run, donate_argnums=donate, keep_unused=True), [args[i] for i in dynamic]


# JAX's message when a primitive has no lowering in the interpret path:
# "MLIR translation rule for primitive 'prng_seed' not found for platform cpu".
_PRIMITIVE = re.compile(r"primitive '([A-Za-z0-9_.]+)'")


def hint(error: Exception, plat: str) -> str:
    """What to add to a lowering error off TPU: the TPU-only primitive the
    interpret lowering could not express, where JAX's message names one."""
    if plat == "tpu":
        return ""
    m = _PRIMITIVE.search(str(error))
    if m is None:
        return ""
    return (f" (the Pallas primitive '{m.group(1)}' is TPU-only: Pallas' interpret lowering, which runs kernels on "
            f"the '{plat}' plugin, cannot express it; the kernel runs on a TPU plugin)")
