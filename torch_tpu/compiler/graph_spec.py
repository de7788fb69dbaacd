"""An ATen FX graph -> the graph description the native lowering reads.

Shapes are specialised: the description is built for concrete input shapes
by running the graph on meta tensors, so every node knows its result types.
Anything the native path cannot express raises Unsupported, and the caller
runs that graph eagerly instead.
"""
import operator

import torch
from torch.fx import Node

from .. import _C


class Unsupported(Exception):
    """This graph cannot become one program; the message says why."""


class Result:
    """Program output number `index`, as an argument of an effectful op."""

    def __init__(self, index):
        self.index = index


# The dtypes a program's values may have.
_DTYPES = frozenset({
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.float32,
    torch.float64, torch.bool, torch.bfloat16, torch.complex64, torch.complex128,
})

_graph_rules = None


def graph_rules():
    global _graph_rules
    if _graph_rules is None:
        _graph_rules = frozenset(_C._graph_rule_names())
    return _graph_rules


# Overloads that are another op under another name, with the same schema.
# (true_divide reaches graphs with symbolic sizes, after decomposition;
# logcumsumexp and cholesky_solve are eager's CompositeExplicitAutograd
# wrappers of the other, whose rule broadcasts batch dims to the result type.)
_SAME_AS = {"aten::true_divide.Tensor": "aten::div.Tensor", "aten::true_divide.Scalar": "aten::div.Scalar",
            "aten::logcumsumexp": "aten::_logcumsumexp", "aten::cholesky_solve": "aten::_cholesky_solve_helper"}


def op_name(target):
    """'aten::add.Tensor' for torch.ops.aten.add.Tensor."""
    overload = target._overloadname
    name = f"{target._schema.name}" + ("" if overload == "default" else f".{overload}")
    return _SAME_AS.get(name, name)


def _unwrap_optional(t):
    return t.getElementType() if isinstance(t, torch._C.OptionalType) else t


def _to_meta(v):
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    if isinstance(v, torch.device):
        return torch.device("meta")
    if isinstance(v, (list, tuple)):
        return type(v)(_to_meta(x) for x in v)
    return v


def _with_results(v, results):
    """`v` with each Result replaced by its value. (A module-level function: a
    recursive closure over `results` would be a reference cycle that keeps a
    call's outputs, and so their device buffers, alive until the next garbage
    collection.)"""
    if isinstance(v, Result):
        return results[v.index]
    if isinstance(v, (list, tuple)):
        return type(v)(_with_results(x, results) for x in v)
    return v


def _flat_results(r):
    """The tensors (or None for a masked-off result) an op returned, in order."""
    if isinstance(r, torch.Tensor) or r is None:
        return [r]
    if isinstance(r, (list, tuple)):
        out = []
        for x in r:
            out.extend(_flat_results(x))
        return out
    raise Unsupported(f"returns {type(r).__name__}")


class GraphSpec:
    """The description plus how to map runtime arguments in and results out."""

    def __init__(self, gm: torch.fx.GraphModule, args):
        self.inputs = []        # (dtype, sizes) per program input
        self.input_slots = []   # index into the runtime args, or ("attr", tensor)
        self.nodes = []
        self.outputs = []       # program output value ids
        self.output_plan = []   # per graph output: ("t", k) or ("c", python value)
        self.effects = []       # (op, args, kwargs) to call after the program; Result(k) = output k
        self._next_id = 0
        self._build(gm, args)

    def _new_id(self):
        self._next_id += 1
        return self._next_id - 1

    def _add_input(self, t, slot):
        if t.dtype not in _DTYPES:
            raise Unsupported(f"input dtype {t.dtype}")
        vid = self._new_id()
        self.inputs.append((t.dtype, list(t.shape)))
        self.input_slots.append(slot)
        return vid

    def _build(self, gm, args):
        ids, vals = {}, {}
        placeholders = iter(range(len(args)))
        # Inputs first: the program's parameters are the tensor arguments.
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                k = next(placeholders)
                a = args[k]
                if isinstance(a, torch.Tensor):
                    ids[node] = self._add_input(a, k)
                    vals[node] = _to_meta(a)
                else:
                    ids[node] = None
                    vals[node] = a
            elif node.op == "get_attr":
                t = getattr(gm, node.target)
                if not isinstance(t, torch.Tensor):
                    raise Unsupported(f"attribute {node.target} is a {type(t).__name__}")
                ids[node] = self._add_input(t, ("attr", t))
                vals[node] = _to_meta(t)
        for node in gm.graph.nodes:
            if node.op == "call_function":
                self._call(node, ids, vals)
            elif node.op == "output":
                self._output(node.args[0], ids, vals)
            elif node.op not in ("placeholder", "get_attr"):
                raise Unsupported(f"FX node kind {node.op}")

    # ---- one node ----------------------------------------------------------------

    def _resolve(self, v, vals):
        """A node argument as a Python value (meta tensors for tensors)."""
        if isinstance(v, Node):
            return vals[v]
        if isinstance(v, (list, tuple)):
            return type(v)(self._resolve(x, vals) for x in v)
        if isinstance(v, dict):
            return {k: self._resolve(x, vals) for k, x in v.items()}
        return v

    def _call(self, node, ids, vals):
        target = node.target
        if target is torch.ops.higher_order.with_effects:
            self._effect(node, ids, vals)
            return
        if target is operator.getitem:
            seq, idx = node.args
            vals[node] = vals[seq][idx]
            ids[node] = ids[seq][idx] if ids[seq] is not None else None
            return
        if not isinstance(target, torch._ops.OpOverload):
            # Python arithmetic on sizes (dynamic shapes): evaluate now.
            if any(isinstance(a, Node) and isinstance(vals[a], torch.Tensor) for a in node.args):
                raise Unsupported(f"{target} on tensors")
            vals[node] = target(*self._resolve(node.args, vals), **self._resolve(node.kwargs, vals))
            ids[node] = None
            return
        name = op_name(target)
        if name == "aten::_assert_scalar":
            # A check on sizes (dynamic shapes): the graph is built for known
            # sizes, so it is decided now, on the host.
            condition, message = self._resolve(node.args, vals)
            if not condition:
                raise RuntimeError(message)
            vals[node] = ids[node] = None
            return
        margs = _to_meta(self._resolve(node.args, vals))
        mkwargs = {k: _to_meta(v) for k, v in self._resolve(node.kwargs, vals).items()}
        if name == "aten::_to_copy":
            dev = node.kwargs.get("device")
            if dev is not None and torch.device(dev).type != "tpu":
                raise Unsupported(f"moves a value to {dev} inside the graph")
        try:
            result = target(*margs, **mkwargs)
        except Exception as e:  # noqa: BLE001 - any meta failure means: not this way
            result = self._result_from_fake(node, e)
        if not isinstance(result, (torch.Tensor, list, tuple)) and result is not None:
            # sym_size and friends: a host value.
            vals[node] = result
            ids[node] = None
            return
        if name not in graph_rules():
            raise Unsupported(f"no tpu lowering rule for {name}")
        flat = _flat_results(result) if target._schema.returns else []  # a check such as _assert_async: no result
        out_types, out_ids = [], []
        for r in flat:
            if r is None:
                out_types.append(None)
                out_ids.append(-1)
            else:
                if r.dtype not in _DTYPES:
                    raise Unsupported(f"{name} returns {r.dtype}")
                out_types.append((r.dtype, list(r.shape)))
                out_ids.append(self._new_id())
        self.nodes.append((name, self._encode_args(target, node, ids, vals), out_types, out_ids))
        vals[node] = result
        if isinstance(result, (list, tuple)):
            ids[node] = out_ids
        else:
            ids[node] = out_ids[0] if out_ids else None

    def _effect(self, node, ids, vals):
        """with_effects(token, op, *args): an op AOTAutograd keeps in order
        with an effect token (at runtime the token is None). Ops without
        results (_linalg_check_errors: a check that raises on bad input)
        run eagerly after the program, on the program's outputs, so they
        raise as in eager mode; the token stays None."""
        _, op, *args = node.args
        if not isinstance(op, torch._ops.OpOverload) or op._schema.returns:
            raise Unsupported(f"with_effects of {op}: only ops without results run after the program")

        def template(v):
            if isinstance(v, Node):
                if isinstance(ids.get(v), int):
                    self.outputs.append(ids[v])
                    return Result(len(self.outputs) - 1)
                return vals[v]
            if isinstance(v, (list, tuple)):
                return type(v)(template(x) for x in v)
            return v

        self.effects.append((op, template(args), {k: template(v) for k, v in node.kwargs.items()}))
        vals[node] = (None,)
        ids[node] = [None]

    def run_effects(self, results):
        """Calls the effectful ops on the program's `results`."""
        for op, args, kwargs in self.effects:
            op(*_with_results(args, results), **{k: _with_results(v, results) for k, v in kwargs.items()})

    def _result_from_fake(self, node, err):
        fake = node.meta.get("val")
        def static(v):
            return isinstance(v, torch.Tensor) and all(isinstance(s, int) for s in v.shape)
        if static(fake):
            return _to_meta(fake)
        if isinstance(fake, (list, tuple)) and all(f is None or static(f) for f in fake):
            return type(fake)(None if f is None else _to_meta(f) for f in fake)
        raise Unsupported(f"{op_name(node.target)}: no result types ({err})")

    def _encode_args(self, target, node, ids, vals):
        schema = target._schema
        out = []
        pos = list(node.args)
        for i, arg in enumerate(schema.arguments):
            if arg.is_out:
                raise Unsupported(f"{op_name(target)} has out= arguments")
            if i < len(pos) and not arg.kwarg_only:
                v = pos[i]
            elif arg.name in node.kwargs:
                v = node.kwargs[arg.name]
            elif arg.has_default_value():
                v = arg.default_value
            else:
                raise Unsupported(f"{op_name(target)}: argument {arg.name} missing")
            out.append(self._encode(v, arg.type, ids, vals))
        return out

    def _tensor_id(self, v, ids):
        vid = ids.get(v) if isinstance(v, Node) else None
        if not isinstance(vid, int):
            raise Unsupported(f"argument {v} is not a tensor value")
        return vid

    def _encode(self, v, schema_type, ids, vals):
        """("T", id) for a tensor value, ("L", ids) for a list of them, else
        ("V", host value): the native side classifies host values by the
        op's schema, as it does an eager call's arguments."""
        if isinstance(v, Node):
            if isinstance(ids.get(v), int):
                return ("T", ids[v])
            v = vals[v]  # a host value computed earlier (a size)
        if isinstance(v, (list, tuple)):
            elem = _unwrap_optional(schema_type)
            elem = elem.getElementType() if isinstance(elem, torch._C.ListType) else elem
            if isinstance(_unwrap_optional(elem), torch._C.TensorType):
                return ("L", [-1 if x is None else self._tensor_id(x, ids) for x in v])
            v = [vals[x] if isinstance(x, Node) else x for x in v]
        for x in v if isinstance(v, list) else (v,):
            if isinstance(x, torch.Tensor):
                raise Unsupported("a tensor constant in the arguments")
            if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                raise Unsupported("a symbolic size reached the graph")
        return ("V", v)

    def _output(self, results, ids, vals):
        for r in results:
            if isinstance(r, Node) and isinstance(ids.get(r), int):
                self.outputs.append(ids[r])
                self.output_plan.append(("t", len(self.outputs) - 1))
            elif isinstance(r, Node):
                v = vals[r]
                if isinstance(v, torch.Tensor):
                    raise Unsupported("an output without a value")
                self.output_plan.append(("c", v))
            else:
                self.output_plan.append(("c", r))
