"""The decompositions AOTAutograd applies while tracing for tpu: PyTorch's own
decompositions, for exactly the ops that have no tpu lowering rule (an op with
a rule stays whole: one rule is better than its pieces, and so do in-place
and out= forms of such an op), plus a generic
expansion of the _foreach_* ops into their per-tensor op."""
import functools

import torch
from torch._decomp import core_aten_decompositions, decomposition_table

from .graph_spec import graph_rules, op_name

aten = torch.ops.aten


def _foreach_decomposition(packet):
    """_foreach_add.List(xs, ys, alpha=...) -> [aten.add(x, y, alpha=...)]."""
    base_name = packet._qualified_op_name.split("::")[1][len("_foreach_"):]
    if base_name.endswith("_"):
        return None  # in-place forms are functionalised before they get here
    base = getattr(aten, base_name, None)
    if base is None:
        return None

    def decomp(*args, **kwargs):
        n = next(len(a) for a in args if isinstance(a, (list, tuple)))
        out = []
        for i in range(n):
            # A list argument contributes its i-th element; a Scalar or a
            # (0-d) tensor argument is shared by every element.
            elem = [a[i] if isinstance(a, (list, tuple)) else a for a in args]
            try:
                out.append(base(*elem, **kwargs))
            except (RuntimeError, TypeError):
                # The per-tensor op takes some of these by keyword
                # (_foreach_addcmul's `value` is positional, addcmul's is not).
                out.append(_call_by_name(base, elem, kwargs))
        return out

    return decomp


def _call_by_name(base, args, kwargs):
    for overload in base.overloads():
        schema = getattr(base, overload)._schema
        positional = [a for a in schema.arguments if not a.kwarg_only]
        if len(args) < len(positional):
            continue
        named = dict(kwargs)
        named.update({a.name: v for a, v in zip(schema.arguments, args)})
        try:
            return getattr(base, overload)(**named)
        except (RuntimeError, TypeError):
            continue
    raise RuntimeError(f"no overload of {base} takes {len(args)} arguments")


def _factory_kwargs(kwargs):
    return {k: kwargs[k] for k in ("dtype", "layout", "device", "pin_memory") if k in kwargs}


# Random factories are empty + an in-place random op in eager mode; in a
# graph they become the functional random op on a fresh tensor, drawing the
# same counters.
def _rand(size, **kw):
    return aten.uniform(aten.empty(size, **_factory_kwargs(kw)), 0.0, 1.0, generator=kw.get("generator"))


def _rand_like(x, **kw):
    return aten.uniform(aten.empty_like(x, **_factory_kwargs(kw)), 0.0, 1.0)


def _randn(size, **kw):
    return aten.normal_functional(aten.empty(size, **_factory_kwargs(kw)), 0.0, 1.0, generator=kw.get("generator"))


def _randn_like(x, **kw):
    return aten.normal_functional(aten.empty_like(x, **_factory_kwargs(kw)), 0.0, 1.0)


def _randint_low(low, high, size, **kw):
    kw.setdefault("dtype", torch.int64)
    return aten.random(aten.empty(size, **_factory_kwargs(kw)), low, high, generator=kw.get("generator"))


def _randint(high, size, **kw):
    return _randint_low(0, high, size, **kw)


def _randint_like(x, high, **kw):
    return aten.random(aten.empty_like(x, **_factory_kwargs(kw)), 0, high)


def _randint_like_low(x, low, high, **kw):
    return aten.random(aten.empty_like(x, **_factory_kwargs(kw)), low, high)


def _linalg_pinv(x, atol=None, rtol=None, hermitian=False):
    """ATen's pseudo-inverse (whose kernel is C++, so PyTorch has no
    decomposition): singular values (eigenvalue magnitudes when hermitian)
    at most max(atol, rtol * the largest) count as zero; rtol defaults to
    eps * max(m, n), or to 0 where an atol > 0 is given."""
    m, n = x.shape[-2:]
    if min(m, n) == 0:
        return x.new_zeros(x.shape[:-2] + (n, m))
    f64 = {"dtype": torch.float64, "device": x.device}
    default_rtol = torch.full((), torch.finfo(x.dtype).eps * max(m, n), **f64)
    if rtol is None:
        rtol = default_rtol if atol is None else torch.where(atol > 0, torch.zeros((), **f64), default_rtol)
    if atol is None:
        atol = torch.zeros((), **f64)
    if hermitian:
        s, u = torch.linalg.eigh(x)
        size = s.abs()
        tol = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * size.amax(-1, keepdim=True))
        s_inv = torch.where(size > tol, s.reciprocal(), 0).to(x.dtype)
        return (u * s_inv.unsqueeze(-2)) @ u.mH
    u, s, vh = torch.linalg.svd(x, full_matrices=False)
    tol = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * s[..., :1])  # s is sorted, largest first
    s_inv = torch.where(s > tol, s.reciprocal(), 0).to(x.dtype)
    return (vh.mH * s_inv.unsqueeze(-2)) @ u.mH


# Ops with a C++ kernel and no PyTorch decomposition.
_OWN = {aten.linalg_pinv.atol_rtol_tensor: _linalg_pinv}

_RANDOM_FACTORIES = {
    aten.rand.default: _rand, aten.rand.generator: _rand, aten.rand_like.default: _rand_like,
    aten.randn.default: _randn, aten.randn.generator: _randn, aten.randn_like.default: _randn_like,
    aten.randint.default: _randint, aten.randint.generator: _randint, aten.randint.low: _randint_low,
    aten.randint.low_generator: _randint_low, aten.randint_like.default: _randint_like,
    aten.randint_like.low_dtype: _randint_like_low,
}


def _functional_form(name):
    """'aten::add.Tensor' for 'aten::add_.Tensor', 'aten::addcmul' for
    'aten::addcmul_' and 'aten::addcmul.out'; None for other ops."""
    base, _, overload = name.partition(".")
    if overload == "out":
        return base
    if base.endswith("_") and not base.endswith("__"):
        return base[:-1] + (f".{overload}" if overload else "")
    return None


def tpu_decompositions():
    return _decompositions_for(graph_rules())


# Keyed on the rule set: a table built while a test pretends an op has no
# rule must not outlive the pretence (it would decompose that op for good).
@functools.lru_cache(maxsize=2)
def _decompositions_for(rules):
    table = dict(_RANDOM_FACTORIES)
    table.update({op: fn for op, fn in _OWN.items() if op_name(op) not in rules})
    for source in (core_aten_decompositions(), decomposition_table):
        for op, fn in source.items():
            if not isinstance(op, torch._ops.OpOverload) or op in table:
                continue
            name = op_name(op)
            # An in-place or out= form whose functional op has a rule is left
            # to functionalization, which turns it into that op and a copy.
            if name not in rules and _functional_form(name) not in rules:
                table[op] = fn
    for name in dir(aten):
        if not name.startswith("_foreach_"):
            continue
        packet = getattr(aten, name)
        decomp = _foreach_decomposition(packet)
        if decomp is None:
            continue
        for overload in packet.overloads():
            table[getattr(packet, overload)] = decomp
    return table
