"""Kernels registered by name and key, and called on tpu tensors: the
interface torch's inductor (its Pallas code for device "tpu"), Helion and
`JaxCallable` use.

    register_custom_kernel(name, key, serialized_mlir_module=bytes)
    lookup_custom_kernel(name, key) -> bool
    call_custom_kernel(name, key, inputs=[tensors], output_shapes=[tensors],
                       donate_argnums=[...])          -> [new tpu tensors]
    call_custom_kernel(..., input_output_aliases={input: output})  (older form)

A call is the operator `tpu_pallas::call(Tensor[] inputs, str name, str key,
int[] donate) -> Tensor[]`, whose lowering is the registered module: it is
compiled once per kernel and input layout by the program cache, runs on the
inputs' device buffers, and inside a fused cluster or a compiled graph is a
call in the one program. A donated input whose buffer is all its own gives
that buffer to the result of its shape and dtype, and then holds that result.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import torch

from torch_tpu._internal.pallas import _dtypes, _module, _platform

_lock = threading.Lock()
_kernels: dict[tuple[str, str], _module.Inlined] = {}
_OP = "tpu_pallas::call"


def register_custom_kernel(name: str, key: str | None, serialized_mlir_module: bytes | str = None) -> str:
    """Registers the StableHLO module (JAX's `mlir_module_serialized`, MLIR
    bytecode or text) of kernel `name` under `key` (its fingerprint when
    `key` is None). Returns the key. Raises RuntimeError when the module
    cannot run on this plugin (exported for another platform, host
    callbacks)."""
    if serialized_mlir_module is None:
        raise TypeError("register_custom_kernel: serialized_mlir_module is required")
    inlined = _module.inline(serialized_mlir_module, _platform.platform(), name)
    key = inlined.fingerprint if key is None else key
    with _lock:
        _kernels[(name, key)] = inlined
    return key


def lookup_custom_kernel(name: str, key: str) -> bool:
    with _lock:
        return (name, key) in _kernels


def _kernel(name, key) -> _module.Inlined:
    with _lock:
        k = _kernels.get((name, key))
    if k is None:
        raise KeyError(f"tpu_torch_pallas: no kernel {name!r} registered under key {key!r} "
                       "(register_custom_kernel first)")
    return k


def call_custom_kernel(name: str, key: str, inputs: Sequence[torch.Tensor], output_shapes: Sequence[torch.Tensor],
                       donate_argnums: Sequence[int] | None = None,
                       input_output_aliases: Mapping[int, int] | None = None,
                       device_assignment: Sequence[int] | None = None) -> list[torch.Tensor]:
    """Runs kernel (name, key) on `inputs` (tpu tensors) and returns new tpu
    tensors shaped as `output_shapes` (only their shapes and dtypes are
    read). `donate_argnums` (or the inputs of `input_output_aliases`) name
    inputs whose buffers the kernel may reuse. `device_assignment` (the ids
    of a kernel's mesh devices; empty for no mesh) may name one device: the
    inputs' own."""
    k = _kernel(name, key)
    inputs = list(inputs)
    if device_assignment:
        ids = [int(d) for d in device_assignment]
        own = {t.device.index or 0 for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "tpu"}
        if len(ids) != 1 or (own and own != set(ids)):
            raise NotImplementedError(f"{name}: device_assignment {ids} (a kernel over several devices, or on "
                                      f"another device than its inputs' {sorted(own)}) is not supported by this "
                                      "torch_tpu; a kernel runs on its inputs' device")
    if len(inputs) != len(k.inputs):
        raise ValueError(f"{name}: the kernel takes {len(k.inputs)} inputs, got {len(inputs)}")
    for i, (t, (dtype, shape)) in enumerate(zip(inputs, k.inputs)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: input {i} is a {type(t).__name__}, not a tensor")
        if t.device.type != "tpu":
            raise ValueError(f"{name}: input {i} is on {t.device}; kernels run on tpu tensors")
        if _dtypes.to_mlir(t.dtype) != dtype or tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name}: input {i} is {t.dtype}{list(t.shape)}, the kernel was lowered for "
                             f"{_dtypes.from_mlir(dtype)}{list(shape)}")
    if output_shapes is not None:
        outs = list(output_shapes)
        want = [(_dtypes.from_mlir(d), tuple(s)) for d, s in k.results]
        got = [(o.dtype, tuple(o.shape)) for o in outs]
        if got != want:
            raise ValueError(f"{name}: output_shapes are {got}, the kernel returns {want}")
    if donate_argnums is None:
        donate_argnums = list(input_output_aliases or {})
    for i in donate_argnums:
        if not 0 <= i < len(inputs):
            raise ValueError(f"{name}: donate_argnums names input {i} of {len(inputs)}")
    _ensure_op()
    return list(torch.ops.tpu_pallas.call(inputs, name, key, [int(i) for i in donate_argnums]))


_op_lock = threading.Lock()
_op_ready = False


def _ensure_op():
    """Defines tpu_pallas::call and registers its lowering, once."""
    global _op_ready, _lib
    with _op_lock:
        if _op_ready:
            return
        _lib = torch.library.Library("tpu_pallas", "FRAGMENT")
        _lib.define("call(Tensor[] inputs, str name, str key, int[] donate) -> Tensor[]")

        def fake(inputs, name, key, donate):
            k = _kernel(name, key)
            device = inputs[0].device if inputs else torch.device("meta")
            return [torch.empty(tuple(s), dtype=_dtypes.from_mlir(d), device=device) for d, s in k.results]

        torch.library.register_fake(_OP, fake, lib=_lib)

        def provider(tensor_types, host):
            name, key, donate = host
            return _kernel(name, key).provider_answer(donate)

        from torch_tpu import _C
        _C._register_external_op(_OP, provider)
        from torch_tpu._internal.pallas.pallas import _forget_graph_rules
        _forget_graph_rules()
        _op_ready = True


_lib = None
