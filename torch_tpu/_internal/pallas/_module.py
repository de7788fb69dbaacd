"""A StableHLO module that JAX exported, made ready to be called from a
torch_tpu program: its functions renamed to symbols unique to the module's
text (so several kernels, or one kernel at several shapes, live side by side
in one program), all private, without JAX's argument and result attributes;
its entry's signature; and the operands it aliases to results (donation).

The module must run on the plugin in use: a Mosaic TPU kernel
(tpu_custom_call), a Triton or Mosaic GPU kernel, or a host callback raises
an error naming what it holds and the platforms involved."""
import dataclasses
import hashlib

from jax._src.interpreters import mlir as _jax_mlir
from jax._src.lib import _jax
from jax._src.lib.mlir import ir

# custom_call targets that only one platform runs.
_PLATFORM_TARGETS = {
    "tpu_custom_call": ("tpu", "a Mosaic TPU kernel"),
    "__gpu$xla.gpu.triton": ("cuda", "a Triton GPU kernel"),
    "mosaic_gpu": ("cuda", "a Mosaic GPU kernel"),
    "mosaic_gpu_v2": ("cuda", "a Mosaic GPU kernel"),
}
_HOST_CALLBACK_PREFIXES = ("xla_python_", "xla_ffi_python_", "xla_ffi_partitioned_python_")


@dataclasses.dataclass(frozen=True)
class Inlined:
    symbol: str          # the entry function's new name
    functions: str       # MLIR text of the renamed func.func ops
    inputs: tuple        # ((mlir element type, shape), ...) of the entry's parameters
    results: tuple       # the same for its results
    aliases: tuple       # ((parameter, result), ...) from tf.aliasing_output
    fingerprint: str     # sha256 of the serialized module

    def provider_answer(self, donate=None):
        """The tuple the C++ external-op provider returns; `donate`, when
        given, keeps only the aliases of those parameters and pairs the
        others with a free result of their type."""
        aliases = list(self.aliases)
        if donate is not None:
            donate = set(donate)
            aliases = [a for a in aliases if a[0] in donate]
            used = {r for _, r in aliases}
            for p in sorted(donate - {a[0] for a in aliases}):
                if not 0 <= p < len(self.inputs):
                    continue
                for r, t in enumerate(self.results):
                    if r not in used and t == self.inputs[p]:
                        aliases.append((p, r))
                        used.add(r)
                        break
        return (self.symbol, self.functions, [list(x) for x in self.inputs],
                [list(x) for x in self.results], aliases)


def _type_of(t):
    t = ir.RankedTensorType(t)
    return (str(t.element_type), list(t.shape))


def _walk(op, fn):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                fn(inner)
                _walk(inner.operation, fn)


def _check_runs_here(module, platform, what):
    found = []

    def visit(op):
        if op.operation.name != "stablehlo.custom_call":
            return
        target = ir.StringAttr(op.operation.attributes["call_target_name"]).value
        found.append(target)

    _walk(module.operation, visit)
    for target in found:
        if target in _PLATFORM_TARGETS:
            needs, kind = _PLATFORM_TARGETS[target]
            if needs != platform:
                raise RuntimeError(
                    f"{what}: the module holds {kind} (custom_call {target}), so it was exported for platform "
                    f"'{needs}', and this torch_tpu runs on the '{platform}' plugin. Export it for "
                    f"platforms=['{platform}'] (a Pallas kernel off TPU: pl.pallas_call(..., interpret=True)).")
        if target.startswith(_HOST_CALLBACK_PREFIXES):
            raise RuntimeError(
                f"{what}: the module calls back into Python on the host (custom_call {target}: "
                "jax.debug.print, pure_callback, or Pallas' TPU interpret mode), which a device program "
                "cannot do")


def _parse(module_bytes):
    if isinstance(module_bytes, str):
        return ir.Module.parse(module_bytes)
    try:
        return _jax.mlir.deserialize_portable_artifact(module_bytes)
    except Exception:  # noqa: BLE001 - plain (non-portable) bytecode or text
        return ir.Module.parse(module_bytes)


def inline(module_bytes, platform: str, what: str) -> Inlined:
    """The module (JAX's serialized StableHLO, MLIR bytecode or text)
    prepared for func.call from a torch_tpu program; `what` names the kernel
    in errors."""
    raw = module_bytes.encode() if isinstance(module_bytes, str) else bytes(module_bytes)
    fingerprint = hashlib.sha256(raw).hexdigest()
    prefix = f"ttk{fingerprint[:16]}_"
    with _jax_mlir.make_ir_context():
        module = _parse(module_bytes)
        _check_runs_here(module, platform, what)
        funcs, main = [], None
        for op in module.body.operations:
            name = op.operation.name
            if name != "func.func":
                raise RuntimeError(f"{what}: the module holds a top-level {name}; only functions can be called "
                                   "from a torch_tpu program (a sharded or multi-device module is not supported)")
            funcs.append(op)
            if ir.StringAttr(op.operation.attributes["sym_name"]).value == "main":
                main = op
        if main is None:
            raise RuntimeError(f"{what}: the module has no @main function")
        ftype = ir.FunctionType(ir.TypeAttr(main.operation.attributes["function_type"]).value)
        inputs = tuple(tuple(_type_of(t)) for t in ftype.inputs)
        inputs = tuple((e, tuple(s)) for e, s in inputs)
        results = tuple((e, tuple(s)) for e, s in (_type_of(t) for t in ftype.results))
        aliases = []
        attrs = main.operation.attributes
        if "arg_attrs" in attrs:
            for i, d in enumerate(ir.ArrayAttr(attrs["arg_attrs"])):
                d = ir.DictAttr(d)
                if "jax.global_constant" in d:
                    raise RuntimeError(f"{what}: the module takes a platform index or dimension variable "
                                       "(exported for several platforms or with symbolic shapes); export it "
                                       f"for platforms=['{platform}'] with static shapes")
                if "tf.aliasing_output" in d:
                    aliases.append((i, ir.IntegerAttr(d["tf.aliasing_output"]).value))
        for op in funcs:
            old = ir.StringAttr(op.operation.attributes["sym_name"]).value
            new = prefix + old
            ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
            op.operation.attributes["sym_name"] = ir.StringAttr.get(new)
            op.operation.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for a in ("arg_attrs", "res_attrs"):
                if a in op.operation.attributes:
                    del op.operation.attributes[a]
        text = "\n".join(op.operation.get_asm(enable_debug_info=False) for op in funcs)
    return Inlined(prefix + "main", text, inputs, tuple((e, tuple(s)) for e, s in results), tuple(aliases),
                   fingerprint)
