"""One FX graph with symbolic sizes run through a shape bucket: pads the
inputs, passes the real sizes, cuts the outputs back (buckets.py says how
padding is kept out of the results)."""
import functools

import torch

from .. import _C
from ..precision import _numerics
from .buckets import (PaddedGraphSpec, _sym_value, contiguous_strides, evaluate, is_simple, is_symbolic, is_unpacked,
                      remember_twin, shape_exprs, twin_of)

# Inputs at most this large are padded on the host: no program per real size.
_HOST_PAD_BYTES = 4 << 20


class NoBucket(Exception):
    """This call's inputs cannot use the bucketed program (the exact path runs)."""


@functools.lru_cache(maxsize=4096)
def _eval(e, values):
    return evaluate(e, dict(values))


def _unpack(t):
    padded, mask = twin_of(t)
    return padded[mask].view(t.shape)


# Set once a bucketed forward has left a saved value padded: until then the
# exact path (every compiled graph without symbolic sizes) skips materialize.
_left_padded = False


def materialize(args):
    """For a graph that does not run bucketed: saved-for-backward values left
    padded by a bucketed forward get their real contents (packed on the
    device), and strided cuts become contiguous, as AOTAutograd made them."""
    if not _left_padded:
        return
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) or a.device.type != "tpu":
            continue
        if is_unpacked(a):
            args[i] = _unpack(a)
        elif not a.is_contiguous() and a.untyped_storage().nbytes() > a.numel() * a.element_size():
            args[i] = a.contiguous()


@functools.lru_cache(maxsize=4096)
def _padded(exprs, buckets):
    values = dict(buckets)
    return tuple(evaluate(e, values) for e in exprs)


class BucketPlan:
    """Where each symbol's real value comes from in a graph's arguments."""

    def __init__(self, gm):
        ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.exprs = [shape_exprs(n) for n in ph]
        self.sym_args = [_sym_value(n) for n in ph]
        self.sources = {}
        for k, ex in enumerate(self.exprs):
            for d, e in enumerate(ex or ()):
                if e.is_Symbol:
                    self.sources.setdefault(e, (k, d))
        for k, e in enumerate(self.sym_args):
            if e is not None and e.is_Symbol:
                self.sources.setdefault(e, (k, None))
        needed = set()
        for ex in self.exprs:
            for e in ex or ():
                needed |= e.free_symbols
        for e in self.sym_args:
            if e is not None:
                needed |= e.free_symbols
        self.active = bool(needed) and needed <= set(self.sources)
        self.merged = {k: True for k, ex in enumerate(self.exprs)
                       if ex and any(is_symbolic(e) and not is_simple(e) for e in ex)}

    def values(self, args):
        real = {}
        for s, (k, d) in self.sources.items():
            a = args[k]
            real[s] = int(a.shape[d]) if d is not None else int(a)
        return real

    def padded_shape(self, k, buckets):
        return _padded(self.exprs[k], tuple(sorted(buckets.items(), key=lambda kv: kv[0].name)))

    def key(self, args, buckets):
        key = [tuple(sorted((s.name, b) for s, b in buckets.items()))]
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                shape = self.padded_shape(k, buckets) if self.exprs[k] else tuple(a.shape)
                key.append((shape, a.dtype, a.device.type))
            elif self.sym_args[k] is not None:
                key.append("sym")
            elif isinstance(a, (int, float, bool)) or a is None:
                key.append(("v", a))
            else:
                key.append(("o", type(a).__name__))
        key.append(_numerics())
        return tuple(key)


class BucketedProgram:
    """The program for one bucket of a graph, and how to call it."""

    def __init__(self, gm, args, plan, buckets, name, saved_from):
        self.plan, self.buckets = plan, buckets
        padded = []
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                shape = plan.padded_shape(k, buckets) if plan.exprs[k] else tuple(a.shape)
                padded.append(torch.empty(shape, dtype=a.dtype, device="meta"))
            elif plan.sym_args[k] is not None:
                padded.append(evaluate(plan.sym_args[k], buckets))
            else:
                padded.append(a)
        self.spec = PaddedGraphSpec(gm, padded, buckets, plan.merged, saved_from)
        self.exe = _C._GraphExecutable(name, self.spec.inputs, self.spec.nodes, self.spec.outputs)
        self._scalars = {}

    def _scalar(self, v, device):
        t = self._scalars.get((v, device))
        if t is None:
            if len(self._scalars) > 256:
                self._scalars.clear()
            t = self._scalars[(v, device)] = torch.tensor(v, dtype=torch.int64, device=device)
        return t

    def _pad(self, t, k, real):
        shape = self.plan.padded_shape(k, self.buckets)
        if is_unpacked(t):
            twin = twin_of(t)
            if tuple(twin[0].shape) == shape:
                return twin
            t = _unpack(t)  # padded for another bucket: its real values, padded again below
        if self.plan.merged.get(k):
            twin = twin_of(t)
            if twin is not None and tuple(twin[0].shape) == shape:
                return twin
            if all(real[s] == b for s, b in self.buckets.items()):  # nothing padded: every element is real
                return t, torch.ones(shape, dtype=torch.bool, device=t.device)
            raise NoBucket("a merged-dimension input that no bucketed graph made")
        if tuple(t.shape) == shape:
            return t, None
        twin = twin_of(t)
        if twin is not None and tuple(twin[0].shape) == shape:
            return twin[0], None
        strides = contiguous_strides(shape)
        nbytes = t.element_size() * int(torch.Size(shape).numel())
        if (t.storage_offset() == 0 and t.stride() == strides[:t.dim()] and t.dim() == len(shape)
                and t.untyped_storage().nbytes() == nbytes):
            return t.as_strided(shape, strides, 0), None  # already the padded buffer (an output of ours)
        pads = []
        for have, want in zip(reversed(t.shape), reversed(shape)):
            pads += [0, want - have]
        if nbytes <= _HOST_PAD_BYTES:
            return torch.nn.functional.pad(t.cpu(), pads).to(t.device), None
        return torch.nn.functional.pad(t, pads), None

    def run(self, args, real):
        global _left_padded
        key = tuple(sorted(real.items(), key=lambda kv: kv[0].name))
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("tpu"))
        padded, masks, inputs = {}, {}, []
        for slot in self.spec.input_slots:
            if isinstance(slot, int):
                if slot not in padded:
                    padded[slot], masks[slot] = self._pad(args[slot], slot, real)
                inputs.append(padded[slot])
            elif slot[0] == "size":
                inputs.append(self._scalar(_eval(slot[1], key), device))
            elif slot[0] == "mask":
                if masks.get(slot[1]) is None:
                    padded[slot[1]], masks[slot[1]] = self._pad(args[slot[1]], slot[1], real)
                inputs.append(masks[slot[1]])
            else:
                inputs.append(slot[1])
        args.clear()
        results = self.exe(inputs)
        out = []
        for p in self.spec.output_plan:
            if p[0] == "t":
                out.append(results[p[1]])
            elif p[0] == "c":
                out.append(p[1])
            elif p[0] == "sym":
                out.append(_eval(p[1], key))
            elif p[0] == "pt":
                r = results[p[1]]
                sizes = [_eval(e, key) for e in p[2]]
                out.append(r if list(r.shape) == sizes else r.as_strided(sizes, r.stride(), 0))
            elif p[0] == "st":  # saved for backward: a real-shaped view of the padded buffer
                _left_padded = True
                padded, mask = results[p[1]], results[p[2]]
                sizes = [_eval(e, key) for e in p[3]]
                if p[4]:
                    out.append(padded.as_strided(sizes, padded.stride(), 0))  # the real prefix, strided
                else:
                    cut = padded.as_strided(sizes, contiguous_strides(sizes), 0)  # contents: see materialize
                    remember_twin(cut, padded, mask, shares_storage=True)
                    out.append(cut)
            else:  # "ct": packed real elements, padded value, its mask
                sizes = [_eval(e, key) for e in p[4]]
                cut = results[p[1]].as_strided(sizes, contiguous_strides(sizes), 0)
                remember_twin(cut, results[p[2]], results[p[3]])
                out.append(cut)
        return out
