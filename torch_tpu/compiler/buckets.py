"""Shape buckets for torch.compile(dynamic=True) and mark_dynamic.

Dynamo hands over a graph whose sizes are symbols (s0, s1, ...). Instead of one
program per concrete size, each symbol is rounded up to a bucket (by default
the next power of two) and one program serves every size in the bucket:

* Inputs are zero-padded at the end of each symbolic dimension. A value's real
  elements are a prefix along every dimension whose size is `symbol + c`
  ("simple"), so its validity mask is `iota < real size`, built in the program
  from the real sizes, which are runtime inputs (0-d int64), not constants.
* A dimension that merges symbols (`s0*s1`, from a view) has its padding
  interleaved: its mask is carried along, computed from the masks it came from.
* Padding never reaches a real element: before an op that reduces or contracts
  over a padded dimension, padded elements are replaced by the op's identity
  (0 for sums and matmuls, -inf for softmax and max, ignore_index for a loss
  target); mean is rewritten as a masked sum over the real count.
* Outputs come back contiguous with their real shapes: a prefix view of the
  padded buffer when only the leading dimension is padded, else packed in the
  program and cut on the host; the padded form of a packed output is kept so
  that the backward graph reads it without re-padding.

Only ops whose padded behaviour is known take part; any other op on a padded
value, a size used as a number, or a negative index into a padded dimension
makes that graph compile per exact shape instead, with the reason in
compile_stats()["bucket_fallbacks"]. Results equal the unpadded run's.
"""
import functools
import math
import operator

import sympy
import torch
from torch.fx import Node
from torch.multiprocessing.reductions import StorageWeakRef

from .. import _C, settings
from .graph_spec import GraphSpec, Unsupported, op_name

aten = torch.ops.aten
_NEG_INF = float("-inf")


# ---- bucket sizes -------------------------------------------------------------------

_bucket_spec = None  # None: read TORCH_TPU_SHAPE_BUCKETS on first use


def set_shape_buckets(spec):
    """"pow2" (default: the next power of two), "off" (a program per exact
    size), or a list of increasing sizes (a size above the last compiles for
    its exact value). TORCH_TPU_SHAPE_BUCKETS takes the same ("16,64,256")."""
    global _bucket_spec
    if isinstance(spec, str):
        try:
            spec = settings.parse("TORCH_TPU_SHAPE_BUCKETS", spec)
        except ValueError:
            raise ValueError(f"shape buckets: expected 'pow2', 'off' or sizes like '16,64,256', got {spec!r}") from None
    if isinstance(spec, (list, tuple)):
        spec = sorted(int(x) for x in spec)
        if not spec or spec[0] < 1:
            raise ValueError(f"shape buckets: sizes must be positive, got {spec}")
        spec = tuple(spec)
    elif spec not in ("pow2", "off"):
        raise ValueError(f"shape buckets: expected 'pow2', 'off' or a list of sizes, got {spec!r}")
    _bucket_spec = spec


def buckets_enabled():
    return _spec() != "off"


def _spec():
    if _bucket_spec is None:
        set_shape_buckets(settings.get("TORCH_TPU_SHAPE_BUCKETS"))
    return _bucket_spec


def bucket(n):
    spec = _spec()
    if spec == "off":
        return n
    if spec == "pow2":
        return 1 if n <= 1 else 1 << (n - 1).bit_length()
    for b in spec:
        if b >= n:
            return b
    return n


# ---- symbolic shapes -----------------------------------------------------------------

def _expr(v):
    return v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(int(v))


def shape_exprs(node):
    """The sympy size of each dimension of a tensor-valued node, or None."""
    val = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    return tuple(_expr(s) for s in val.shape)


def is_symbolic(e):
    return not e.is_number


def is_simple(e):
    """symbol + constant: its padding is a suffix, its mask iota < size."""
    syms = e.free_symbols
    return len(syms) == 1 and (e - next(iter(syms))).is_number


def evaluate(e, values):
    return int(e.xreplace({s: sympy.Integer(values[s]) for s in e.free_symbols}))


def _sym_value(node):
    """The sympy expression of a node holding a symbolic size, else None."""
    val = node.meta.get("val") if isinstance(node, Node) else None
    if isinstance(val, torch.SymInt) and is_symbolic(val.node.expr):
        return val.node.expr
    return None


# ---- which ops take part -------------------------------------------------------------

# How each op treats padding is declared beside its lowering rule
# (TT_PADDING in csrc/lowering/ops/*.cpp; see lowering::Padding).
def _identity(v):
    return int(v) if isinstance(v, float) and math.isfinite(v) and v.is_integer() else v


@functools.lru_cache(maxsize=1)
def _padding():
    """({kind: op names}, {op: {argument: identity}}) from the rules' facts."""
    facts = _C._padding_facts()
    kinds = {k: {n for n, (kind, _) in facts.items() if kind == k} for k in ("view", "elementwise", "creation")}
    fills = {n: {a: _identity(v) for a, v in f.items()} for n, (kind, f) in facts.items() if kind == "fills"}
    return kinds, fills


def _kind(name):
    """"view", "elementwise", "creation", "fills", or None (no facts)."""
    for kind, names in _padding()[0].items():
        if name in names:
            return kind
    return "fills" if name in _padding()[1] else None


# Size arguments that may hold a symbolic size (evaluated at the bucket).
_SIZE_ARGS = {"size", "shape", "end", "stride", "sizes"}


def _is_pointwise(target):
    return torch.Tag.pointwise in target.tags


# Integer divisions raise for a zero divisor (a device check, as the CPU's
# ZeroDivisionError): a padded integer divisor gets 1 in its padding.
_DIVISIONS = {"aten::div.Tensor_mode", "aten::floor_divide", "aten::remainder.Tensor",
              "aten::remainder.Scalar_Tensor", "aten::fmod.Tensor"}


class _Ref:
    """A program value handed to PaddedGraphSpec.emit: its id and meta tensor."""

    def __init__(self, vid, meta):
        self.vid, self.meta = vid, meta


class PaddedGraphSpec(GraphSpec):
    """A GraphSpec for padded input shapes that keeps padding out of real results.

    input_slots gains ("size", expr) (a real size, 0-d int64) and ("mask", k)
    (the carried mask of a merged-dimension input); output_plan gains
    ("pt", k, exprs) (cut to the real sizes), ("ct", packed, padded, mask,
    exprs) (a merged-dimension output), ("st", padded, mask, exprs, simple) (a
    value saved for backward, left padded) and ("sym", expr) (a real size)."""

    def __init__(self, gm, padded_args, buckets, merged_inputs, saved_from):
        self.buckets = buckets              # {symbol: bucket size}
        self.saved_from = saved_from        # outputs from this index on are saved for backward
        self.merged_inputs = merged_inputs  # placeholder index -> True when its mask is a runtime input
        self._size_ids = {}                 # expr -> value id of its runtime size
        self._prefix = {}                   # (rank, dim, expr) -> mask id
        self._masks = {}                    # value id -> full mask id (values with merged dims)
        self._exprs = {}                    # value id -> shape exprs
        self._input_vids = []               # in the order of self.inputs
        super().__init__(gm, padded_args)
        if self.effects:
            raise Unsupported(f"{self.effects[0][0]} runs after the program on real-sized values")
        self._renumber()

    def _renumber(self):
        """The lowering numbers inputs 0..n-1; size and mask inputs were added
        after nodes, so give every value its place."""
        order = {v: i for i, v in enumerate(self._input_vids)}
        for n in self.nodes:
            for v in n[3]:
                if v >= 0:
                    order[v] = len(order)
        def arg(a):
            if a[0] == "T":
                return ("T", order[a[1]])
            if a[0] == "L":
                return ("L", [-1 if v < 0 else order[v] for v in a[1]])
            return a
        self.nodes = [(op, [arg(a) for a in args], types, [-1 if v < 0 else order[v] for v in outs])
                      for op, args, types, outs in self.nodes]
        self.outputs = [order[v] for v in self.outputs]

    # ---- emitting helper nodes ----

    def emit(self, target, *args, **kwargs):
        """Appends target(args) to the program; returns a _Ref (or list of them)."""
        schema = target._schema.arguments

        def meta(v, arg=None):
            if isinstance(v, _Ref):  # program values are dense: meta strides do not matter
                return torch.empty(v.meta.shape, dtype=v.meta.dtype, device="meta")
            if isinstance(v, (list, tuple)):
                return type(v)(meta(x) for x in v)
            if arg is not None and isinstance(v, (int, float)) and isinstance(arg.type, torch._C.TensorType):
                # A number in a Tensor slot: a 0-d tensor promotes as the wrapped number will.
                dtype = torch.int64 if isinstance(v, int) else torch.float32
                return torch.scalar_tensor(v, dtype=dtype, device="meta")
            return v
        pos_args = [meta(v, schema[i] if i < len(schema) else None) for i, v in enumerate(args)]
        by_name = {a.name: a for a in schema}
        result = target(*pos_args, **{k: meta(v, by_name.get(k)) for k, v in kwargs.items()})
        encoded = []
        for i, arg in enumerate(schema):
            if i < len(args) and not arg.kwarg_only:
                v = args[i]
            elif arg.name in kwargs:
                v = kwargs[arg.name]
            else:
                v = arg.default_value
            if isinstance(v, _Ref):
                encoded.append(("T", v.vid))
            elif isinstance(v, (list, tuple)) and v and isinstance(v[0], _Ref):
                encoded.append(("L", [x.vid for x in v]))
            else:
                encoded.append(self._encode(v, arg.type, {}, {}))
        flat = result if isinstance(result, (list, tuple)) else [result]
        ids = [self._new_id() for _ in flat]
        self.nodes.append((op_name(target), encoded, [(r.dtype, list(r.shape)) for r in flat], ids))
        refs = [_Ref(i, r) for i, r in zip(ids, flat)]
        return refs if isinstance(result, (list, tuple)) else refs[0]

    def _size_ref(self, e):
        if e not in self._size_ids:
            meta = torch.empty((), dtype=torch.int64, device="meta")
            self._size_ids[e] = self._add_input(meta, ("size", e))
        return _Ref(self._size_ids[e], torch.empty((), dtype=torch.int64, device="meta"))

    def _prefix_mask(self, rank, dim, e, length):
        key = (rank, dim, e)
        if key not in self._prefix:
            iota = self.emit(aten.arange.default, length, dtype=torch.int64, device="meta")
            shape = [1] * rank
            shape[dim] = length
            iota = self.emit(aten.view.default, iota, shape)
            self._prefix[key] = self.emit(aten.lt.Tensor, iota, self._size_ref(e))
        return self._prefix[key]

    def mask_of(self, vid, meta, exprs, full=False):
        """A bool mask of the value's real elements (broadcastable to it; its
        full shape when full=True), or None when nothing is padded."""
        if vid in self._masks:
            m = self._masks[vid]
        else:
            m = None
            for d, e in enumerate(exprs):
                if not is_symbolic(e):
                    continue
                if not is_simple(e):
                    raise Unsupported("bucketing: a merged padded dimension without a known mask")
                p = self._prefix_mask(len(exprs), d, e, meta.shape[d])
                m = p if m is None else self.emit(aten.logical_and.default, m, p)
        if m is not None and full and list(m.meta.shape) != list(meta.shape):
            m = self.emit(aten.expand.default, m, list(meta.shape))
        return m

    def _fill(self, ref, exprs, value):
        m = self.mask_of(ref.vid, ref.meta, exprs)
        if m is None:
            return ref
        dtype = ref.meta.dtype if isinstance(ref.meta, torch.Tensor) else None
        if isinstance(value, float) and value in (_NEG_INF, -_NEG_INF) and dtype is not None \
                and not dtype.is_floating_point:
            # max/softmax identity of an integer or bool value: its lowest (highest) number
            info = torch.iinfo(dtype) if dtype != torch.bool else None
            low = value < 0
            value = (info.min if low else info.max) if info else (not low)
        return self.emit(aten.where.self, m, ref, value)

    # ---- the graph ----

    def _build(self, gm, args):
        self._placeholder_exprs = [shape_exprs(n) for n in gm.graph.nodes if n.op == "placeholder"]
        super()._build(gm, args)

    def _add_input(self, t, slot):
        vid = super()._add_input(t, slot)
        self._input_vids.append(vid)
        if isinstance(slot, int) and self._placeholder_exprs[slot] is not None:
            self._exprs[vid] = self._placeholder_exprs[slot]
            if self.merged_inputs.get(slot):
                mask = torch.empty(t.shape, dtype=torch.bool, device="meta")
                self._masks[vid] = _Ref(self._add_input(mask, ("mask", slot)), mask)
        return vid

    def _call(self, node, ids, vals):
        self._ids_ref = ids
        target = node.target
        if target is operator.getitem or not isinstance(target, torch._ops.OpOverload):
            super()._call(node, ids, vals)
            self._note(node, ids)
            return
        name = op_name(target)
        if not isinstance(node.meta.get("val"), (torch.Tensor, list, tuple)):
            super()._call(node, ids, vals)  # sym_size and friends: a host value
            return
        tensor_args = self._tensor_args(node, ids)
        padded = [(a, self._exprs.get(ids[a])) for a in tensor_args
                  if any(is_symbolic(e) for e in self._exprs.get(ids[a], ()))]
        if self._size_as_number(node, name, ids, vals):
            return
        self._check_size_args(node, name)
        out = shape_exprs(node)
        kind = _kind(name)
        if not padded or kind == "creation":
            outs = self._out_exprs(node)
            if any(is_symbolic(e) for ex in outs for e in ex):
                if kind not in ("creation", "view"):
                    raise Unsupported(f"bucketing: {name} makes a padded value")
                if any(not is_simple(e) for ex in outs for e in ex if is_symbolic(e)):
                    raise Unsupported(f"bucketing: {name} makes a merged padded dimension")
            super()._call(node, ids, vals)
            self._note(node, ids)
            return
        if kind == "view":
            self._check_view(node, name, vals)
            super()._call(node, ids, vals)
            self._note(node, ids)
            outs = ids[node] if isinstance(ids[node], list) else [ids[node]]
            if any(is_symbolic(e) and not is_simple(e) for o in outs for e in self._exprs.get(o, ())):
                src = node.args[0]
                m = self.mask_of(ids[src], vals[src], self._exprs[ids[src]], full=True)
                rest = [self._resolve(a, vals) for a in node.args[1:]]
                ms = self.emit(target, m, *rest)
                for o, mo in zip(outs, ms if isinstance(ms, list) else [ms]):
                    self._masks[o] = mo
            return
        if name == "aten::constant_pad_nd":
            self._constant_pad(node, ids, vals)
            return
        if name == "aten::cat":
            self._cat(node, ids, vals)
            return
        if name == "aten::slice_scatter":
            self._slice_scatter(node, ids, vals)
            return
        if kind == "elementwise" or _is_pointwise(target):
            call_ids = self._divisor_filled(node, name, ids, vals)
            super()._call(node, call_ids, vals)
            ids[node] = call_ids[node]
            self._note(node, ids)
            if out is not None and any(is_symbolic(e) and not is_simple(e) for e in out):
                m = None
                for a, ex in padded:
                    am = self.mask_of(ids[a], vals[a], ex)
                    m = am if m is None else self.emit(aten.logical_and.default, m, am)
                self._masks[ids[node]] = self.emit(aten.expand.default, m, list(vals[node].shape)) \
                    if list(m.meta.shape) != list(vals[node].shape) else m
            return
        if name in ("aten::mean.dim", "aten::mean"):
            self._mean(node, ids, vals)
            return
        if kind != "fills":
            raise Unsupported(f"bucketing: no padded rule for {name}")
        self._check_reduction(node, name, vals)
        local = dict(ids)
        fills = _padding()[1][name]
        schema_args = target._schema.arguments
        for i, arg in enumerate(schema_args):
            v = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            if arg.name in fills and isinstance(v, Node) and isinstance(ids.get(v), int):
                fill = fills[arg.name]
                if fill == "ignore":
                    fill = self._arg(node, "ignore_index")
                filled = self._fill(_Ref(ids[v], vals[v]), self._exprs.get(ids[v], ()), fill)
                local[v] = filled.vid
        super()._call(node, local, vals)
        ids[node] = local[node]
        self._note(node, ids)
        self._merged_outputs(node, name, ids, vals)

    # ---- checks and per-op details ----

    def _arg(self, node, name):
        for i, arg in enumerate(node.target._schema.arguments):
            if arg.name == name:
                if i < len(node.args):
                    return node.args[i]
                return node.kwargs.get(name, arg.default_value if arg.has_default_value() else None)
        raise KeyError(name)

    def _tensor_args(self, node, ids):
        out = []
        def walk(v):
            if isinstance(v, Node) and isinstance(ids.get(v), int):
                out.append(v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
        walk(list(node.args) + list(node.kwargs.values()))
        return out

    def _size_as_number(self, node, name, ids, vals):
        """x / size (mean's backward) and the like: the Tensor overload with the
        real size as a runtime 0-d input, as the real run divides by it."""
        if not (name.endswith(".Scalar") and _is_pointwise(node.target) and len(node.args) == 2):
            return False
        x, other = node.args
        expr = _sym_value(other)
        if expr is None or not isinstance(ids.get(x), int):
            return False
        overload = getattr(getattr(aten, node.target._schema.name.split("::")[1]), "Tensor", None)
        if overload is None:
            raise Unsupported(f"bucketing: {name} uses a size as a number")
        r = self.emit(overload, _Ref(ids[x], vals[x]), self._size_ref(expr))
        ids[node], vals[node] = r.vid, r.meta
        self._note(node, ids)
        if ids[x] in self._masks:
            self._masks[r.vid] = self._masks[ids[x]]
        return True

    def _check_size_args(self, node, name):
        for i, arg in enumerate(node.target._schema.arguments):
            v = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            items = v if isinstance(v, (list, tuple)) else [v]
            if any(_sym_value(x) is not None for x in items):
                ok = arg.name in _SIZE_ARGS or (name == "aten::slice.Tensor" and arg.name == "end")
                if not ok:
                    raise Unsupported(f"bucketing: {name} uses a size as its {arg.name}")

    def _check_view(self, node, name, vals):
        if name not in ("aten::slice.Tensor", "aten::select.int", "aten::split.Tensor", "aten::split_with_sizes",
                        "aten::unbind.int"):
            return
        src = node.args[0]
        exprs = self._exprs.get(self._id_of(src), ())
        dim = self._arg(node, "dim")
        dim = dim + len(exprs) if dim < 0 else dim
        if not is_symbolic(exprs[dim]):
            return
        if name in ("aten::split.Tensor", "aten::split_with_sizes", "aten::unbind.int"):
            raise Unsupported(f"bucketing: {name} along a padded dimension")
        if name == "aten::select.int":
            idx = self._arg(node, "index")
            if not isinstance(idx, int) or idx < 0:
                raise Unsupported("bucketing: select from the end of a padded dimension")
        else:
            start, step = self._arg(node, "start"), self._arg(node, "step")
            if start is not None and (not isinstance(start, int) or start < 0):
                raise Unsupported("bucketing: a slice from the end of a padded dimension")
            if step not in (None, 1) or not is_simple(exprs[dim]):
                raise Unsupported("bucketing: a strided slice of a padded dimension")

    def _id_of(self, node):
        return self._ids_ref.get(node)

    def _check_reduction(self, node, name, vals):
        if name == "aten::native_layer_norm":
            exprs = self._exprs[self._id_of(node.args[0])]
            n = len(self._arg(node, "normalized_shape"))
            if any(is_symbolic(e) for e in exprs[len(exprs) - n:]):
                raise Unsupported("bucketing: layer norm over a padded dimension")
        if name == "aten::index.Tensor":
            indices = self._arg(node, "indices")
            if self._padded(node.args[0]) or len(indices) != 1 or indices[0] is None:
                raise Unsupported("bucketing: index into a padded value")
        if name in ("aten::index_select", "aten::index_add") and self._padded(node.args[0]):
            raise Unsupported(f"bucketing: {name} into a padded value")
        if name.startswith("aten::_scaled_dot_product_flash_attention_for_cpu"):
            q, k = self._arg(node, "query"), self._arg(node, "key")
            qe, ke = self._exprs[self._id_of(q)], self._exprs[self._id_of(k)]
            if is_symbolic(ke[-2]) and not (self._arg(node, "is_causal") and self._arg(node, "attn_mask") is None
                                            and qe[-2] == ke[-2]):
                raise Unsupported("bucketing: attention over padded keys without is_causal")

    def _divisor_filled(self, node, name, ids, vals):
        """ids, with a padded integer divisor of an integer division filled
        with 1 in its padding (_DIVISIONS)."""
        d = node.args[1] if name in _DIVISIONS and len(node.args) > 1 else None
        if not (isinstance(d, Node) and isinstance(ids.get(d), int)) or vals[d].dtype.is_floating_point:
            return ids
        local = dict(ids)
        local[d] = self._fill(_Ref(ids[d], vals[d]), self._exprs.get(ids[d], ()), 1).vid
        return local

    def _padded(self, node):
        return any(is_symbolic(e) for e in self._exprs.get(self._id_of(node), ()))

    def _out_exprs(self, node):
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        return [tuple(_expr(s) for s in v.shape) for v in vals if isinstance(v, torch.Tensor)]

    def _note(self, node, ids):
        """Records the symbolic shapes of the node's program values."""
        self._ids_ref = ids
        vid = ids.get(node)
        val = node.meta.get("val")
        if isinstance(vid, int) and isinstance(val, torch.Tensor):
            self._exprs[vid] = tuple(_expr(s) for s in val.shape)
        elif isinstance(vid, list) and isinstance(val, (list, tuple)):
            for i, v in zip(vid, val):
                if i >= 0 and isinstance(v, torch.Tensor):
                    self._exprs[i] = tuple(_expr(s) for s in v.shape)

    def _merged_outputs(self, node, name, ids, vals):
        """Masks for results with a merged padded dimension, by op."""
        vid = ids[node]
        outs = vid if isinstance(vid, list) else [vid]
        if not any(o >= 0 and any(is_symbolic(e) and not is_simple(e) for e in self._exprs.get(o, ()))
                   for o in outs):
            return
        def full(n):
            return self.mask_of(ids[n], vals[n], self._exprs[ids[n]], full=True)
        res_meta = vals[node] if not isinstance(vals[node], (list, tuple)) else vals[node][0]
        shape = list(res_meta.shape)
        if name in ("aten::mm", "aten::addmm", "aten::bmm"):
            a, b = (node.args[1], node.args[2]) if name == "aten::addmm" else (node.args[0], node.args[1])
            ma, mb = full(a), full(b)
            k = len(shape) - 1
            rows = self.emit(aten.any.dim, ma, k, True) if ma is not None else None
            cols = self.emit(aten.any.dim, mb, k - 1, True) if mb is not None else None
            m = rows if cols is None else cols if rows is None else self.emit(aten.logical_and.default, rows, cols)
            self._masks[outs[0]] = self.emit(aten.expand.default, m, shape)
        elif name in ("aten::_softmax", "aten::_log_softmax", "aten::_softmax_backward_data",
                      "aten::_log_softmax_backward_data", "aten::nll_loss_backward"):
            src = node.args[1] if name == "aten::nll_loss_backward" else node.args[0]
            self._masks[outs[0]] = full(src)
        elif name == "aten::native_layer_norm":
            m = full(node.args[0])
            self._masks[outs[0]] = m
            n = len(self._arg(node, "normalized_shape"))
            dims = list(range(len(shape) - n, len(shape)))
            stat = self.emit(aten.any.dims, m, dims, True)
            for o in outs[1:]:
                if o >= 0:
                    self._masks[o] = stat
        elif name == "aten::native_layer_norm_backward":
            self._masks[outs[0]] = full(node.args[1])
        elif name == "aten::index.Tensor":
            idx = self._arg(node, "indices")[0]
            m = full(idx)
            extra = len(shape) - len(m.meta.shape)
            m = self.emit(aten.view.default, m, list(m.meta.shape) + [1] * extra)
            self._masks[outs[0]] = self.emit(aten.expand.default, m, shape)
        elif name == "aten::index_select":
            dim = self._arg(node, "dim")
            dim = dim + len(shape) if dim < 0 else dim
            m = full(self._arg(node, "index"))
            view = [1] * len(shape)
            view[dim] = shape[dim]
            m = self.emit(aten.view.default, m, view)
            self._masks[outs[0]] = self.emit(aten.expand.default, m, shape)
        elif name in ("aten::sum.dim_IntList", "aten::amax", "aten::logsumexp"):
            dims = self._arg(node, "dim")
            keep = self._arg(node, "keepdim")
            m = full(node.args[0])
            self._masks[outs[0]] = self.emit(aten.any.dims, m, list(dims), bool(keep))
        elif name == "aten::nll_loss_forward" and self._arg(node, "reduction") == 0:
            self._masks[outs[0]] = full(node.args[1])
        else:
            raise Unsupported(f"bucketing: {name} makes a merged padded dimension")

    def _constant_pad(self, node, ids, vals):
        """Padding a padded dim at its end: the bucket's padding becomes the
        pad value first, so the real result is again a prefix."""
        x = node.args[0]
        pads, value = self._arg(node, "pad"), self._arg(node, "value")
        exprs = self._exprs[ids[x]]
        rank = len(exprs)
        for i in range(0, len(pads), 2):
            d = rank - 1 - i // 2
            if is_symbolic(exprs[d]) and (not is_simple(exprs[d]) or min(pads[i], pads[i + 1]) < 0):
                raise Unsupported("bucketing: constant_pad_nd crops or pads a merged padded dimension")
        if any(is_symbolic(e) and not is_simple(e) for e in exprs):
            raise Unsupported("bucketing: constant_pad_nd of a merged padded dimension")
        local = dict(ids)
        local[x] = self._fill(_Ref(ids[x], vals[x]), exprs, 0 if value is None else value).vid
        super()._call(node, local, vals)
        ids[node] = local[node]
        self._note(node, ids)

    def _cat(self, node, ids, vals):
        parts = self._arg(node, "tensors")
        rank = len(self._exprs[ids[parts[0]]])
        dim = self._arg(node, "dim")
        dim = dim + rank if dim < 0 else dim
        if any(is_symbolic(self._exprs[ids[p]][dim]) for p in parts):
            raise Unsupported("bucketing: cat along a padded dimension")
        super()._call(node, ids, vals)
        self._note(node, ids)
        if any(is_symbolic(e) and not is_simple(e) for e in self._exprs[ids[node]]):
            masks = [self.mask_of(ids[p], vals[p], self._exprs[ids[p]], full=True) for p in parts]
            if any(m is None for m in masks):
                raise Unsupported("bucketing: cat of padded and unpadded values")
            self._masks[ids[node]] = self.emit(aten.cat.default, masks, dim)

    def _slice_scatter(self, node, ids, vals):
        """slice_scatter along a padded dim: src's padding must not overwrite
        real elements of self, so it is first filled with what it covers."""
        x, src = node.args[0], node.args[1]
        xe, se = self._exprs[ids[x]], self._exprs[ids[src]]
        dim = self._arg(node, "dim")
        dim = dim + len(xe) if dim < 0 else dim
        start, step = self._arg(node, "start"), self._arg(node, "step")
        start = 0 if start is None else start
        local = dict(ids)
        if is_symbolic(xe[dim]):
            if not isinstance(start, int) or start < 0 or step not in (None, 1) or not is_simple(xe[dim]):
                raise Unsupported("bucketing: slice_scatter from the end of a padded dimension")
            n = vals[src].shape[dim]
            covered = self.emit(aten.slice.Tensor, _Ref(ids[x], vals[x]), dim, start, start + n)
            local[src] = self._fill(_Ref(ids[src], vals[src]), se, covered).vid
        super()._call(node, local, vals)
        ids[node] = local[node]
        self._note(node, ids)
        if ids[x] in self._masks:
            self._masks[ids[node]] = self._masks[ids[x]]

    def _mean(self, node, ids, vals):
        """mean over padded dims = sum of the real elements / their count."""
        x = node.args[0]
        whole = node.target._overloadname == "default"
        dims = None if whole else self._arg(node, "dim")
        keep = False if whole else bool(self._arg(node, "keepdim"))
        dtype = self._arg(node, "dtype")
        exprs = self._exprs[ids[x]]
        rank = len(exprs)
        dims = list(range(rank)) if not dims else [d + rank if d < 0 else d for d in dims]
        if not any(is_symbolic(exprs[d]) for d in dims):
            super()._call(node, ids, vals)
            self._note(node, ids)
            self._merged_outputs(node, "aten::sum.dim_IntList", ids, vals)
            return
        xr = _Ref(ids[x], vals[x])
        mask = self.mask_of(xr.vid, xr.meta, exprs, full=True)
        total = self.emit(aten.sum.dim_IntList, self._fill(xr, exprs, 0), dims, keep, dtype=dtype)
        count = self.emit(aten._to_copy.default, mask, dtype=total.meta.dtype)
        count = self.emit(aten.sum.dim_IntList, count, dims, keep)
        mean = self.emit(aten.div.Tensor, total, count)
        ids[node] = mean.vid
        vals[node] = mean.meta
        self._note(node, ids)
        if any(is_symbolic(e) and not is_simple(e) for e in self._exprs[mean.vid]):
            self._masks[mean.vid] = self.emit(aten.any.dims, mask, dims, keep)

    # ---- outputs ----

    def _output(self, results, ids, vals):
        self._ids_ref = ids
        for i, r in enumerate(results):
            sym = _sym_value(r) if isinstance(r, Node) else None
            if sym is not None:
                self.output_plan.append(("sym", sym))
                continue
            if not (isinstance(r, Node) and isinstance(ids.get(r), int)):
                super()._output([r], ids, vals)
                continue
            vid = ids[r]
            exprs = self._exprs.get(vid) or shape_exprs(r)
            if exprs is None or not any(is_symbolic(e) for e in exprs):
                super()._output([r], ids, vals)
                continue
            self.outputs.append(vid)
            k = len(self.outputs) - 1
            if is_simple(exprs[0]) and not any(is_symbolic(e) for e in exprs[1:]):
                # Only the leading dim is padded: the real part is a contiguous prefix.
                self.output_plan.append(("pt", k, exprs))
                continue
            if i >= self.saved_from:
                # Saved for backward: only our backward graph reads it, in the
                # padded layout; it is packed on the host only if that graph
                # cannot take the bucket (bucketed_program.materialize).
                mask = self.mask_of(vid, vals[r], exprs, full=True)
                self.outputs.append(mask.vid)
                simple = all(is_simple(e) for e in exprs if is_symbolic(e))
                self.output_plan.append(("st", k, k + 1, exprs, simple))
                continue
            # Elsewhere the real part is strided; graphs and users expect a
            # contiguous result (they view it), so pack it in the program.
            packed, mask = self._pack(_Ref(vid, vals[r]), exprs)
            self.outputs.extend([packed.vid, mask.vid])
            self.output_plan.append(("ct", k + 1, k, k + 2, exprs))

    def _pack(self, x, exprs):
        """The real elements of x, in order, at the front of a flat buffer."""
        mask = self.mask_of(x.vid, x.meta, exprs, full=True)
        n = x.meta.numel()
        flat = self.emit(aten.view.default, x, [n])
        mflat = self.emit(aten.view.default, mask, [n])
        pos = self.emit(aten.cumsum.default, mflat, 0, dtype=torch.int64)
        pos = self.emit(aten.sub.Tensor, pos, 1)
        pos = self.emit(aten.where.self, mflat, pos, n)  # padding goes to the spare last slot
        base = self.emit(aten.zeros.default, [n + 1], dtype=x.meta.dtype, device="meta")
        packed = self.emit(aten.scatter.src, base, 0, pos, flat)
        packed = self.emit(aten.slice.Tensor, packed, 0, 0, n)
        return packed, mask


# ---- padded twins of merged-dimension outputs ----------------------------------------

# StorageWeakRef of a real-shaped output -> (padded tensor, its mask), so a
# backward graph reads the padded layout its forward made instead of the cut one.
# A saved-for-backward output shares its padded tensor's storage (its contents
# are not the real values until materialize()), so its entry keeps only the
# padded shape: holding the tensor would keep the storage alive for ever.
_twins = {}


def remember_twin(real, padded, mask, shares_storage=False):
    for key in [k for k in _twins if k.expired()]:
        del _twins[key]
    _twins[StorageWeakRef(real.untyped_storage())] = (None if shares_storage else padded, tuple(padded.shape), mask,
                                                        shares_storage)


def twin_of(t):
    """(padded tensor, mask) made for t by a bucketed graph, or None."""
    entry = _twins.get(StorageWeakRef(t.untyped_storage()))
    if entry is None:
        return None
    padded, shape, mask, shared = entry
    if shared:
        padded = t.as_strided(shape, contiguous_strides(shape), 0)
    return padded, mask


def is_unpacked(t):
    """t is a saved-for-backward placeholder whose real values live padded."""
    entry = _twins.get(StorageWeakRef(t.untyped_storage()))
    return entry is not None and entry[3]


def contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))
