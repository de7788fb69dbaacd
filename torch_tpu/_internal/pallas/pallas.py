"""JAX functions and Pallas kernels as operators on tpu tensors.

- `jax_op(name, fn)`: a `torch.library` custom operator (a CustomOpDef:
  add `register_autograd` / `register_fake` to it as to any) whose tpu
  kernel is `fn` traced by JAX. Every parameter and the return are
  annotated: `jax.Array` parameters are tensors, `int`/`float`/`bool`/`str`
  ones are static (part of the compile key). It is lowered once per shape,
  dtype and static values; its module becomes a call inside the program that
  runs it (one program per call in strict eager, the cluster's program in
  fused eager, the graph's in torch.compile).
- `JaxCallable`: a `jax.jit`-ed function called on tpu tensors through
  `tpu_torch_pallas` (Helion's and `custom_kernel`'s path).
- `custom_kernel`: a Pallas kernel body plus output shapes, as a callable
  on tpu tensors.
"""
from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import jax
import jax.export
import jax.numpy as jnp
import torch

from torch_tpu._internal.pallas import _dtypes, _interpret, _module, _platform, tpu_torch_pallas


def jax_placeholder(tensor):
    """A `jax.ShapeDtypeStruct` for a torch tensor (anything else is
    returned as it is: static values pass through)."""
    if not isinstance(tensor, torch.Tensor):
        return tensor
    return jax.ShapeDtypeStruct(tuple(tensor.shape), _dtypes.to_jax(tensor.dtype))


def jax_placeholders(tensors):
    if isinstance(tensors, torch.Tensor):
        return jax_placeholder(tensors)
    return [jax_placeholder(t) for t in tensors]


def torch_placeholder(aval):
    """An empty CPU tensor of a JAX abstract value's shape and dtype (only
    its shape and dtype are used)."""
    if not hasattr(aval, "shape") or not hasattr(aval, "dtype"):
        return aval
    return torch.empty(tuple(aval.shape), dtype=_dtypes.from_jax(aval.dtype))


def _get_kernel_invocation_key(trace_key: str, input_args: Sequence[Any], input_kwargs: Mapping[str, Any],
                               static_argnums: Sequence[int] = ()) -> str:
    """A string naming one specialization of a kernel: its trace key, each
    tensor's shape and dtype, each static argument's value, and the keyword
    arguments."""
    static = frozenset(static_argnums)

    def part(i, v):
        if isinstance(v, torch.Tensor):
            return f"{tuple(v.shape)}x{v.dtype}"
        return ("static:" if i in static else "") + repr(v)

    args = ",".join(part(i, a) for i, a in enumerate(input_args))
    kwargs = ",".join(f"{k}={part(-1, v)}" for k, v in sorted(input_kwargs.items()))
    return f"{trace_key};{args};{kwargs}"


def _x64_for(placeholders) -> bool:
    return any(isinstance(p, jax.ShapeDtypeStruct) and jnp.dtype(p.dtype).itemsize == 8
               and jnp.dtype(p.dtype).kind in "iufc" for p in placeholders)


def _export(jit_fn, name: str, args, kwargs=None, static_argnums=(), donate_argnums=()):
    """jax.export of `jit_fn` for the plugin's platform; a failure to trace or
    lower raises a RuntimeError naming the kernel and JAX's reason.

    Off TPU, every Pallas kernel in the function lowers through Pallas'
    interpret lowering (plain StableHLO a plugin can run), whether or not it
    asked for `interpret=True` (see `_interpret`)."""
    kwargs = kwargs or {}
    plat = _platform.platform()
    try:
        with jax.enable_x64(_x64_for(list(args) + list(kwargs.values()))), \
                _interpret.pallas_as_stablehlo(plat != "tpu"):
            if plat != "tpu":
                rewritten = _interpret.interpreted(jit_fn, args, kwargs, static_argnums, donate_argnums)
                if rewritten is not None:
                    fn, dynamic = rewritten
                    return jax.export.export(fn, platforms=[plat])(*dynamic)
            return jax.export.export(jit_fn, platforms=[plat])(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every JAX failure becomes one error naming the kernel
        raise RuntimeError(f"{name}: JAX could not lower the kernel for the '{plat}' plugin: "
                           f"{type(e).__name__}: {e}{_interpret.hint(e, plat)}") from e


class JaxCallable:
    """A jitted JAX function called on tpu tensors. Non-tensor arguments at
    `static_argnums` are compile-time constants. Each specialization (see
    `_get_kernel_invocation_key`) is exported once and registered with
    `tpu_torch_pallas` under its module's fingerprint; `output_shapes` keeps
    (placeholders, out_tree) per specialization and
    `kernel_key_to_mlir_fingerprint` its fingerprint."""

    def __init__(self, name: str, jit_fn: Any, trace_key: str, static_argnums: Sequence[int] = (),
                 donate_argnums: Sequence[int] | None = None,
                 input_output_aliases: Mapping[int, int] | None = None, mesh=None,
                 input_partition_specs=None):
        if mesh is not None and getattr(mesh, "size", 1) != 1:
            raise NotImplementedError(f"{name}: a mesh of {mesh.size} devices (a sharded kernel) is not supported "
                                      "by this torch_tpu; a one-device mesh is")
        self.mesh = mesh
        self.input_partition_specs = input_partition_specs
        self.name = name
        self.jit_fn = jit_fn
        self.trace_key = trace_key
        self.static_argnums = tuple(static_argnums)
        self.input_output_aliases = dict(input_output_aliases or {})
        if donate_argnums is None:
            donate_argnums = tuple(self.input_output_aliases)
        self.donate_argnums = tuple(donate_argnums)
        self.output_shapes: dict[str, tuple] = {}
        self.kernel_key_to_mlir_fingerprint: dict[str, str] = {}
        self.exported: dict[str, Any] = {}

    def __repr__(self):
        return f"JaxCallable(name={self.name}, trace_key={self.trace_key}, static_argnums={self.static_argnums})"

    def _check_args(self, args):
        for i, a in enumerate(args):
            if i in self.static_argnums:
                if isinstance(a, torch.Tensor):
                    raise ValueError(f"{self.name}: argument {i} is static (static_argnums) but is a tensor")
            elif a is not None and not isinstance(a, torch.Tensor):
                raise TypeError(f"{self.name}: argument {i} is a {type(a).__name__}; kernels take tensors and "
                                "None, and other values at static_argnums")

    def specialize(self, args, kwargs) -> str:
        """Exports and registers the kernel for these arguments (once per
        invocation key); returns the key."""
        key = _get_kernel_invocation_key(self.trace_key, args, kwargs, self.static_argnums)
        if key in self.output_shapes and tpu_torch_pallas.lookup_custom_kernel(
                self.name, self.kernel_key_to_mlir_fingerprint[key]):
            return key
        exported = _export(self.jit_fn, self.name, [jax_placeholder(a) for a in args], kwargs,
                           self.static_argnums, self.donate_argnums)
        serialized = exported.mlir_module_serialized
        fingerprint = tpu_torch_pallas.register_custom_kernel(self.name, None, serialized_mlir_module=serialized)
        self.exported[key] = exported
        self.kernel_key_to_mlir_fingerprint[key] = fingerprint
        self.output_shapes[key] = ([torch_placeholder(a) for a in exported.out_avals], exported.out_tree)
        return key

    def __call__(self, *args, **kwargs):
        self._check_args(args)
        key = self.specialize(args, kwargs)
        output_shapes, out_tree = self.output_shapes[key]
        tensors = [a for i, a in enumerate(args) if a is not None and i not in self.static_argnums]
        results = tpu_torch_pallas.call_custom_kernel(
            self.name, self.kernel_key_to_mlir_fingerprint[key], inputs=tensors, output_shapes=output_shapes,
            donate_argnums=list(self.donate_argnums))
        return out_tree.unflatten(results)


# ---- jax_op ---------------------------------------------------------------

_STATIC_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}


def _is_array_type(t) -> bool:
    return t is jax.Array or t is jnp.ndarray or (isinstance(t, type) and issubclass(t, jax.Array))


def _return_schema(name, t) -> tuple[str, bool]:
    """The schema's return for annotation `t`, and whether it is a list."""
    if _is_array_type(t):
        return "Tensor", False
    origin, targs = typing.get_origin(t), typing.get_args(t)
    if origin in (tuple, list) and targs:
        if origin is list or (len(targs) == 2 and targs[1] is Ellipsis):
            if _is_array_type(targs[0]):
                return "Tensor[]", True
        elif all(_is_array_type(a) for a in targs):
            return "(" + ", ".join("Tensor" for _ in targs) + ")", False
    raise TypeError(f"jax_op {name}: the return annotation {t!r} is not jax.Array, tuple[jax.Array, ...] "
                    "or list[jax.Array]")


def _signature(name, fn):
    """(schema, tensor flags per parameter, returns a list) from `fn`'s
    annotations."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # noqa: BLE001 - unresolvable annotations
        raise TypeError(f"jax_op {name}: cannot read the annotations of {fn!r}: {e}") from e
    params, is_tensor = [], []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"jax_op {name}: parameter *{p.name} is not supported; name each parameter")
        if p.name not in hints:
            raise TypeError(f"jax_op {name}: parameter '{p.name}' has no annotation; annotate tensors as jax.Array "
                            "and static values as int, float, bool or str")
        t = hints[p.name]
        if _is_array_type(t):
            params.append(f"Tensor {p.name}")
            is_tensor.append(True)
        elif t in _STATIC_TYPES:
            params.append(f"{_STATIC_TYPES[t]} {p.name}")
            is_tensor.append(False)
        else:
            raise TypeError(f"jax_op {name}: parameter '{p.name}' is annotated {t!r}; annotate tensors as "
                            "jax.Array and static values as int, float, bool or str")
    if "return" not in hints:
        raise TypeError(f"jax_op {name}: {fn.__name__} has no return annotation (jax.Array, "
                        "tuple[jax.Array, ...] or list[jax.Array])")
    ret, returns_list = _return_schema(name, hints["return"])
    return f"({', '.join(params)}) -> {ret}", is_tensor, returns_list


def jax_op(name: str, fn: Callable, *, donate_argnums: Sequence[int] | int | None = None, mesh=None,
           input_partition_specs=None):
    """Registers `fn`, a JAX function, as the PyTorch operator `name`
    ("namespace::op_name") and returns its `torch.library.CustomOpDef`.

    On tpu tensors the operator runs `fn` lowered by JAX for the plugin in
    use; its result shapes (the fake kernel) come from the export.
    `donate_argnums` names tensor parameters whose buffers the kernel may
    reuse for a result of the same shape and dtype (strict eager, when the
    tensor is all of its storage and no other operand reads it): the
    donated storage, with every view of it, then holds that result, and its
    old value is gone."""
    if mesh is not None or input_partition_specs is not None:
        raise NotImplementedError(f"jax_op {name}: mesh and input_partition_specs (sharded kernels) are not "
                                  "supported by this torch_tpu; call the kernel on one device's tensors")
    if "::" not in name:
        raise ValueError(f"jax_op: the name {name!r} must be 'namespace::op_name'")
    schema, is_tensor, returns_list = _signature(name, fn)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    donate_argnums = tuple(donate_argnums or ())
    for i in donate_argnums:
        if not 0 <= i < len(is_tensor) or not is_tensor[i]:
            raise ValueError(f"jax_op {name}: donate_argnums names argument {i}, which is not a jax.Array parameter")
    static_argnums = tuple(i for i, t in enumerate(is_tensor) if not t)
    jitted = jax.jit(fn, static_argnums=static_argnums, donate_argnums=donate_argnums, keep_unused=True)
    kernel = JaxCallable(name, jitted, trace_key=name, static_argnums=static_argnums,
                         donate_argnums=donate_argnums)

    def placeholders(tensor_types, host):
        """The export's arguments from the C++ rule's operand types and host values."""
        it_t, it_h = iter(tensor_types), iter(host)
        out = []
        for t in is_tensor:
            if t:
                d, s = next(it_t)
                out.append(jax.ShapeDtypeStruct(tuple(s), _dtypes.to_jax(_dtypes.from_mlir(d))))
            else:
                out.append(next(it_h))
        return out

    # (placeholders key) -> Exported; shared by the fake kernel and the provider.
    exports: dict[str, Any] = {}

    def export_for(args):
        key = _get_kernel_invocation_key(name, [(a.shape, str(a.dtype)) if isinstance(a, jax.ShapeDtypeStruct)
                                                else a for a in args], {}, static_argnums)
        e = exports.get(key)
        if e is None:
            e = exports[key] = _export(jitted, name, args, None, static_argnums, donate_argnums)
        return e

    def check_tensors(args):
        for i, a in enumerate(args):
            if is_tensor[i] and not isinstance(a, torch.Tensor):
                raise TypeError(f"{name}: argument {i} must be a tensor, got {type(a).__name__}")

    def impl(*args):
        check_tensors(args)
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        raise NotImplementedError(f"{name}: a jax_op runs on tpu tensors; got tensors on {sorted(devices)}")

    op = torch.library.custom_op(name, impl, mutates_args=(), schema=schema)

    def fake(*args):
        check_tensors(args)
        e = export_for([jax_placeholder(a) for a in args])
        ref = next((a for a in args if isinstance(a, torch.Tensor)), None)
        outs = [ref.new_empty(tuple(a.shape), dtype=_dtypes.from_jax(a.dtype)) if ref is not None
                else torch.empty(tuple(a.shape), dtype=_dtypes.from_jax(a.dtype), device="meta")
                for a in e.out_avals]
        if returns_list:
            return outs
        return outs[0] if len(outs) == 1 and schema.endswith("-> Tensor") else tuple(outs)

    op.register_fake(fake)

    def provider(tensor_types, host):
        e = export_for(placeholders(tensor_types, host))
        return _module.inline(e.mlir_module_serialized, _platform.platform(), name).provider_answer()

    from torch_tpu import _C
    _C._register_external_op(_qualified(op), provider)
    _forget_graph_rules()
    op._torch_tpu_kernel = kernel
    return op


def _qualified(op) -> str:
    return op._qualname if "::" in op._qualname else f"{op._namespace}::{op._name}"


def _forget_graph_rules():
    """torch.compile's graph builder caches the names of ops with rules."""
    from torch_tpu.compiler import graph_spec
    graph_spec._graph_rules = None


# ---- custom_kernel --------------------------------------------------------

def custom_kernel(output_shapes, pallas_kernel: Callable | None = None, **pl_kwargs):
    """A decorator that makes a Pallas kernel body callable on tpu tensors:
    `output_shapes` is a tensor, a list of them, or a function of the call's
    arguments returning those (only shapes and dtypes are read); `pl_kwargs`
    go to `pl.pallas_call` (grid, in_specs, out_specs,
    input_output_aliases, interpret, ...)."""
    from jax.experimental import pallas as pl

    def decorator(body):
        name = pl_kwargs.get("name", getattr(body, "__name__", "kernel"))
        trace_key = _get_kernel_invocation_key(f"{name}_{id(body)}", [], {k: v for k, v in pl_kwargs.items()
                                                                         if isinstance(v, (int, str, bool))})
        callables: dict[str, JaxCallable] = {}

        @functools.wraps(body)
        def call(*args, **kwargs):
            shapes = output_shapes(*args, **kwargs) if callable(output_shapes) else output_shapes
            out = jax_placeholders(shapes) if isinstance(shapes, (list, tuple)) else jax_placeholder(shapes)
            if isinstance(shapes, tuple):
                out = tuple(out)
            key = _get_kernel_invocation_key(trace_key, args, kwargs) + repr(out)
            c = callables.get(key)
            if c is None:
                c = callables[key] = JaxCallable(
                    name, jax.jit(pl.pallas_call(body, out_shape=out, **pl_kwargs)), trace_key=key,
                    input_output_aliases=pl_kwargs.get("input_output_aliases"))
            return c(*args, **kwargs)

        return call

    return decorator if pallas_kernel is None else decorator(pallas_kernel)


def custom_jax_kernel(jax_fn: Callable | None = None, name: str | None = None, static_argnums: Sequence[int] = (),
                      input_output_aliases: Mapping[int, int] | None = None, **jit_kwargs):
    """A JAX function (a kernel library's wrapper, say) as a JaxCallable on
    tpu tensors."""

    def decorator(fn):
        n = name or getattr(fn, "__name__", "kernel")
        jitted = jax.jit(fn, static_argnums=static_argnums, **jit_kwargs)
        donate = jit_kwargs.get("donate_argnums")
        return JaxCallable(n, jitted, trace_key=f"{n}_{id(fn)}", static_argnums=static_argnums,
                           donate_argnums=(donate,) if isinstance(donate, int) else donate,
                           input_output_aliases=input_output_aliases)

    return decorator if jax_fn is None else decorator(jax_fn)
