"""Eager decompositions: an ATen op without a tpu lowering rule runs as
PyTorch's own decomposition of it (torch._decomp's table, the one
torch.compile uses) op by op on tpu, instead of on the CPU, when every op
that decomposition expands to runs natively on tpu.

The CPU fallback kernel (csrc/backend/pipeline/cpu_fallback.cpp) offers each call to
`handle`, which decides once per (op, argument signature):

1. the op's meta kernel runs on meta copies of the arguments, so arguments
   PyTorch rejects raise PyTorch's own error;
2. the decomposition is traced on the meta copies, recording every ATen op it
   calls; each must have a tpu kernel (a lowering rule, a view, a factory, a
   composite of such) or decompose natively itself, by the same test;
3. the first real call runs the decomposition on tpu and checks that nothing
   it called fell back to the CPU (a rule may decline some arguments).

When a step fails the op falls back to the CPU whole, counted in
torch_tpu.fallback_ops() and warned about with the reason. Calls that ran
decomposed are counted in torch_tpu.decomposed_ops(). In-place and out=
forms without a decomposition of their own use their functional form's and
copy the result. Ops whose results alias an input (views) are never
decomposed: a decomposition would return a copy.
"""
import functools
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _C, settings

aten = torch.ops.aten

_MAX_DEPTH = 6  # nested decompositions followed by the meta check

_NATIVE, _TRIAL, _FALLBACK = "native", "trial", "fallback"

_lock = threading.RLock()
# Thread id -> names of the ops that thread is decomposing. (Not a
# threading.local: the autograd engine's device threads are not Python
# threads, and a threading.local's per-thread cleanup can race interpreter
# exit on them.)
_active = {}
_decisions = {}    # (op name, signature) -> (state, reason)
_counts = {}       # op name -> calls run decomposed
_decomps = {}      # OpOverload -> callable or None


# ---- which ops run natively ------------------------------------------------

def _qualified(op):
    name = op._schema.name
    return name + "." + op._overloadname if op._overloadname != "default" else name


def _has_tpu_kernel(op):
    """A kernel of its own for tpu: a lowering rule (registered with its
    in-place and out= forms), a view, a factory, a backend kernel; or a
    composite that PyTorch runs for every backend. Not a structured op's
    functional wrapper (CompositeExplicitAutogradNonFunctional): it calls
    the op's out= form, which has no tpu kernel when the functional has none."""
    name = op._schema.name
    overload = op._schema.overload_name
    qual = name + ("." + overload if overload else "")
    for key in ("PrivateUse1", "CompositeExplicitAutograd", "CompositeImplicitAutograd"):
        if torch._C._dispatch_has_kernel_for_dispatch_key(qual, key):
            return True
    return False


@functools.lru_cache(maxsize=None)
def _resolve(name):
    """'aten::gcd.out' -> torch.ops.aten.gcd.out"""
    ns, rest = name.split("::", 1)
    base, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), base), overload or "default")


@functools.lru_cache(maxsize=None)
def _returns_alias(op):
    return any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns)


def _functional_overload(op):
    """The functional overload an in-place or out= overload writes the result
    of: same base name (without the trailing '_'), same non-out arguments."""
    schema = op._schema
    namespace, base = schema.name.split("::", 1)
    if base.startswith("__i") and base.endswith("__"):
        base = "__" + base[3:]  # __ilshift__ writes __lshift__'s result
    elif base.endswith("_"):
        base = base[:-1]
    packet = getattr(getattr(torch.ops, namespace), base, None)
    if packet is None:
        return None
    wanted = [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]
    for overload in packet.overloads():
        f = getattr(packet, overload)
        fs = f._schema
        if fs.is_mutable or any(a.is_out for a in fs.arguments):
            continue
        have = [(a.name, str(a.type)) for a in fs.arguments]
        if have == wanted:
            return f
    return None


def _decomposition(op):
    """PyTorch's decomposition of `op`, or one derived from its functional
    overload for an in-place or out= overload, or None."""
    if op in _decomps:
        return _decomps[op]
    from torch._decomp import decomposition_table

    fn = decomposition_table.get(op)
    if fn is None and op._schema.is_mutable:
        functional = _functional_overload(op)
        if functional is not None and (functional in decomposition_table or _has_tpu_kernel(functional)):
            fn = _write_back(op, functional)
    _decomps[op] = fn
    return fn


def _write_back(op, functional):
    """The in-place or out= form of `functional`: its result copied into the
    written argument(s), which are returned, with out='s resize rules."""
    schema = op._schema
    out_names = [a.name for a in schema.arguments if a.is_out]
    inplace = not out_names

    def run(*args, **kwargs):
        bound = _bind(schema, args, kwargs)
        inputs = {k: v for k, v in bound.items() if k not in out_names}
        result = functional(**inputs)
        results = result if isinstance(result, (tuple, list)) else (result,)
        targets = [bound[schema.arguments[0].name]] if inplace else [bound[n] for n in out_names]
        for dst, src in zip(targets, results):
            if not inplace and dst.shape != src.shape:
                torch._prims_common.wrappers._maybe_resize_out(dst, src.shape)
            if not torch.can_cast(src.dtype, dst.dtype):
                raise RuntimeError(f"result type {_dtype_name(src.dtype)} can't be cast to the desired "
                                   f"output type {_dtype_name(dst.dtype)}")
            dst.copy_(src)
        return targets[0] if len(targets) == 1 else tuple(targets)

    return run


def _dtype_name(dtype):
    return str(dtype).split(".")[-1].capitalize()


def _bind(schema, args, kwargs):
    bound = {}
    for a, v in zip(schema.arguments, args):
        bound[a.name] = v
    bound.update(kwargs)
    return bound


# ---- the meta check ----------------------------------------------------------

class _OpRecorder(TorchDispatchMode):
    """Records every ATen op called below it, with its (meta) arguments."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


def _to_meta(v):
    if isinstance(v, torch.Tensor):
        if v.device.type == "meta":
            return v
        if v.device.type == "cpu" and v.dim() == 0:
            return v  # a CPU scalar tensor stays one (ops accept it beside device tensors)
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)):
        return type(v)(_to_meta(x) for x in v)
    if isinstance(v, torch.device) and v.type != "cpu":
        return torch.device("meta")
    return v


def _signature(schema, args):
    parts = []
    for a, v in zip(schema.arguments, args):
        parts.append(_value_key(v, isinstance(a.type, torch.NumberType)))
    return tuple(parts)


def _value_key(v, is_scalar=False):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.stride(), v.storage_offset(), v.device.type == "cpu")
    if isinstance(v, (list, tuple)):
        return tuple(_value_key(x) for x in v)
    if is_scalar:
        return type(v)  # a Scalar's value never changes which ops run
    if isinstance(v, torch.Generator):
        return "generator"
    if isinstance(v, (int, float, bool, str, type(None), torch.dtype, torch.layout, torch.memory_format)):
        return v
    if isinstance(v, torch.device):
        return v.type
    return repr(v)


def _split_args(schema, args):
    positional, kwargs = [], {}
    for a, v in zip(schema.arguments, args):
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            positional.append(v)
    return positional, kwargs


def _meta_check(op, args, kwargs, depth, chain):
    """None when the decomposition of `op` on these meta arguments expands
    only to ops that run natively on tpu, else the reason it does not."""
    fn = _decomposition(op)
    if fn is None:
        return f"{_qualified(op)} has no decomposition"
    if _returns_alias(op):
        return f"{_qualified(op)} returns a view"
    return _trace_check(fn, args, kwargs, depth, chain)


def _trace_check(fn, args, kwargs, depth, chain):
    """Runs fn on meta arguments and checks every op it calls: one with a
    tpu kernel passes; a prim passes when its ATen implementation does (its
    tpu kernel runs that); any other op passes when its own decomposition
    does, to a bounded depth, never through an op already being expanded."""
    recorder = _OpRecorder()
    try:
        with recorder:
            result = fn(*args, **kwargs)
    except Exception as e:  # data-dependent, or meta cannot run it
        return f"its decomposition cannot be traced on meta tensors ({type(e).__name__}: {_first_line(e)})"
    if result is NotImplemented:
        return "its decomposition declines these arguments"
    for func, a, k in recorder.calls:
        if not isinstance(func, torch._ops.OpOverload):
            continue
        name = _qualified(func)
        if func in chain:
            return f"its decomposition needs {name} again"
        is_prim = func.namespace == "prims" and getattr(func, "impl_aten", None) is not None
        if not is_prim and _has_tpu_kernel(func):
            continue
        if depth >= _MAX_DEPTH:
            return f"its decomposition needs {name}, nested too deep to check"
        if is_prim:
            inner = _trace_check(func.impl_aten, a, k, depth + 1, chain | {func})
        else:
            inner = _meta_check(func, a, k, depth + 1, chain | {func})
        if inner is not None:
            return f"its decomposition needs {name}, which has no tpu rule ({inner})"
    return None


def _first_line(e):
    s = str(e).strip().splitlines()
    return s[0][:200] if s else ""


def _is_meta_limitation(e):
    """An error that says meta tensors cannot run this, not that the
    arguments are wrong."""
    if isinstance(e, NotImplementedError):
        return True
    text = str(e).lower()
    return "meta" in text or "data-dependent" in text or "data dependent" in text


def _decide(op, args):
    """(state, reason) for this call's signature. Raises PyTorch's own error
    when the op's meta kernel rejects the arguments."""
    schema = op._schema
    try:
        meta_args = [_to_meta(v) for v in args]
    except Exception as e:  # a tensor meta cannot describe (sparse, quantized...)
        return _FALLBACK, f"its arguments have no meta form ({type(e).__name__}: {_first_line(e)})"
    positional, kwargs = _split_args(schema, meta_args)
    try:
        op(*positional, **kwargs)
    except Exception as e:
        if not _is_meta_limitation(e):
            raise
    meta_args = [_to_meta(v) for v in args]  # fresh: the meta kernel may have resized out= copies
    positional, kwargs = _split_args(schema, meta_args)
    reason = _meta_check(op, positional, kwargs, 0, frozenset([op]))
    if reason is not None:
        return _FALLBACK, reason
    return _TRIAL, None


# ---- the entry point from C++ ------------------------------------------------

def handle(name, args):
    """Called by the CPU fallback kernel for an op without a rule.

    Returns (True, result) after running the op's decomposition on tpu, or
    (False, reason, for_every_call) to send it to the CPU; for_every_call
    means the op has no decomposition whatever its arguments."""
    active = _active.setdefault(threading.get_ident(), set())
    if name in active:
        # A kernel the decomposition trusted (a composite) calls the op back.
        return (False, "its decomposition calls it again", False)
    op = _resolve(name)
    if _returns_alias(op):
        return (False, "it returns a view, which a decomposition would copy", True)
    if _decomposition(op) is None:
        return (False, "", True)
    schema = op._schema
    key = (name, _signature(schema, args))
    with _lock:
        decision = _decisions.get(key)
    if decision is None:
        decision = _decide(op, args)
        with _lock:
            _decisions[key] = decision
    state, reason = decision
    if state == _FALLBACK:
        return (False, reason or "", False)
    positional, kwargs = _split_args(schema, args)
    fn = _decomposition(op)
    active.add(name)
    try:
        if state == _NATIVE:
            result = fn(*positional, **kwargs)
            _count(name)
            return (True, result)
        return _trial(name, key, fn, positional, kwargs)
    finally:
        active.discard(name)


def _trial(name, key, fn, positional, kwargs):
    """The first real call of a signature: the decomposition runs on tpu;
    when anything it called fell back to the CPU, later calls of this
    signature go to the CPU whole (this call's result is still right)."""
    before = _C._stats("fallbacks")
    try:
        result = fn(*positional, **kwargs)
    except NotImplementedError as e:
        if "would fall back to the CPU" not in str(e):
            raise
        reason = f"its decomposition needs an op that runs on the CPU ({_first_line(e)})"
        with _lock:
            _decisions[key] = (_FALLBACK, reason)
        return (False, reason, False)
    after = _C._stats("fallbacks")
    fell_back = sorted(k for k, v in after.items() if v != before.get(k, 0))
    with _lock:
        if fell_back:
            _decisions[key] = (_FALLBACK, "its decomposition runs " + ", ".join(fell_back) + " on the CPU")
        else:
            _decisions[key] = (_NATIVE, None)
    if not fell_back:
        _count(name)
    return (True, result)


def _count(name):
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1


# ---- public API ------------------------------------------------------------------

def decomposed_ops():
    """{op name: calls} for ops that ran on tpu as PyTorch's decomposition
    (they have no rule of their own)."""
    with _lock:
        return dict(_counts)


def reset_decomposed_ops():
    """Zeros the counts and forgets every decision (each signature is
    checked again at its next call)."""
    with _lock:
        _counts.clear()
        _decisions.clear()


def decomposition_decisions():
    """{(op name, signature): (state, reason)}: what was decided per call
    signature; state is 'native', 'trial' (not run yet) or 'fallback'."""
    with _lock:
        return dict(_decisions)


def install():
    """Offers ops without a rule to their decomposition, unless
    TORCH_TPU_EAGER_DECOMPOSITIONS=0 (every such op then goes to the CPU)."""
    if settings.get("TORCH_TPU_EAGER_DECOMPOSITIONS"):
        _C._set_eager_decomposition_handler(handle)
