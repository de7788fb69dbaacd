"""One FX graph as a callable: a compiled program per input signature (per
shape bucket when its sizes are symbolic), one program of one replica per
rank holding its collectives (replicated_graph.py) or program segments
around them (collective_segments.py), or eager execution (op by op on tpu)
when the graph cannot become programs.

A graph's program for the signature of AOTAutograd's example inputs starts
building (graph description, lowering, XLA compile or disk load) in a
background thread as soon as AOTAutograd hands the graph over, so that the
forward's and the backward's programs build while the other builds and
while the Python around them runs; the first call waits for it
(compile_ahead_enabled says when; otherwise the first call builds it)."""
import concurrent.futures
import os
import threading
import time

import torch

from .. import _C, settings
from ..precision import _numerics
from . import stats
from .graph_spec import GraphSpec, Unsupported
from .buckets import bucket, buckets_enabled
from .bucketed_program import BucketedProgram, BucketPlan, NoBucket, materialize
from .collective_segments import SegmentedGraph, has_collectives
from .replicated_graph import ReplicatedGraph, replica_layout


def _signature(args):
    sig = []
    for a in args:
        if isinstance(a, torch.Tensor):
            sig.append((tuple(a.shape), a.dtype, a.device.type))
        elif isinstance(a, (int, float, bool)) or a is None:
            sig.append(("v", a))
        else:
            sig.append(("o", type(a).__name__))
    sig.append(_numerics())  # matmul precision, excess precision: they pick the program
    return tuple(sig)


_pool = None
_pool_lock = threading.Lock()


def compile_ahead_enabled():
    """TORCH_TPU_COMPILE_AHEAD=1 / 0; unset: on where this process may use 4
    or more cores. The background build needs a spare core to pay off: on a
    busy 2-core machine it took CPU from Dynamo's and AOTAutograd's tracing,
    which are the first step's critical path, and made the step slower."""
    v = settings.get("TORCH_TPU_COMPILE_AHEAD")
    if v is not None:
        return v
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores >= 4


def _builder():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="torch_tpu_compile")
        return _pool


def _example_signature(example_inputs):
    """_signature() of the arguments AOTAutograd's example inputs (fake
    tensors) stand for, and meta tensors of their shapes; None when a size
    or value is symbolic (the program is then built at the first call)."""
    sig, metas = [], []
    for a in example_inputs:
        if isinstance(a, torch.Tensor):
            if not all(type(s) is int for s in a.shape) or not all(type(s) is int for s in a.stride()):
                return None
            sig.append((tuple(a.shape), a.dtype, a.device.type))
            metas.append((tuple(a.shape), a.stride(), a.dtype))
        elif isinstance(a, (int, float, bool)) or a is None:
            sig.append(("v", a))
            metas.append(a)
        else:
            return None
    sig.append(_numerics())
    return tuple(sig), metas


class CompiledGraph:
    """Called by AOTAutograd with one list of arguments (boxed)."""

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, name: str, saved_from=None, updates=(), segment=False):
        """`segment`: this graph is one program segment of a graph with
        collectives (not counted as a graph of its own, exact shapes only:
        a collective must see real sizes, never a bucket's padding)."""
        self.gm = gm
        self.name = name
        # (argument, graph output): the output is the argument's new value,
        # which AOTAutograd copies into it after the call.
        self.updates = tuple(updates)
        # Forward graphs: outputs from this index on are saved for backward.
        n_out = len(next(n for n in gm.graph.nodes if n.op == "output").args[0])
        self.saved_from = n_out if saved_from is None else saved_from
        self.programs = {}  # signature -> (GraphExecutable, GraphSpec) or None (runs eagerly)
        self.pending = {}  # signature -> Future of _build's result, started by build_ahead
        self.bucketed = {}  # bucket key -> BucketedProgram
        self.segmented = None
        self.replicated = None
        if not segment:
            stats.record_graph(name, gm)
            if has_collectives(gm):
                layout = replica_layout(gm)
                if layout is not None:
                    self.replicated = ReplicatedGraph(gm, name, layout, self._segments)
                else:
                    self.segmented = self._segments()
        plan = (BucketPlan(gm) if buckets_enabled() and not segment and self.segmented is None
                and self.replicated is None else None)
        self.plan = plan if plan is not None and plan.active else None

    def _segments(self):
        segmented = SegmentedGraph(self.gm, self.name, lambda g, n: CompiledGraph(g, n, segment=True))
        stats.record_segments(self.name, segmented)
        return segmented

    def __call__(self, *args):
        # Boxed (one list, which we may clear) or, where a wrapper dropped
        # the _boxed_call flag, plain positional arguments. Graph inputs are
        # tensors and numbers, never a list, so the two cannot be confused.
        args = args[0] if len(args) == 1 and type(args[0]) is list else list(args)
        if self.replicated is not None:
            materialize(args)
            return self.replicated(args, _signature(args))
        if self.segmented is not None:
            materialize(args)
            return self.segmented(args)
        if self.plan is not None:
            out = self._call_bucketed(args)
            if out is not None:
                return out
        materialize(args)
        sig = _signature(args)
        entry = self.programs.get(sig, False)
        if entry is False:
            entry = self._compile(args, sig)
        if entry is None:
            return self._run_eager(args)
        exe, spec = entry
        inputs = [args[s] if isinstance(s, int) else s[1] for s in spec.input_slots]
        args.clear()  # boxed convention: let the inputs die early
        if torch.autograd.profiler._is_profiler_enabled:
            # Named in a profile (benchmarks/step_breakdown.py counts it as dispatch).
            with torch.autograd.profiler.record_function(f"tpu::program {self.name}"):
                results = exe(inputs)
        else:
            results = exe(inputs)
        spec.run_effects(results)
        return [results[p[1]] if p[0] == "t" else p[1] for p in spec.output_plan]

    def _call_bucketed(self, args):
        real = self.plan.values(args)
        buckets = {s: bucket(v) for s, v in real.items()}
        key = self.plan.key(args, buckets)
        prog = self.bucketed.get(key)
        if prog is None:
            if self.bucketed or self.programs:
                stats.record_recompile(self.name)
            t0 = time.perf_counter()
            try:
                prog = BucketedProgram(self.gm, args, self.plan, buckets, self.name, self.saved_from)
            except Exception as e:  # noqa: BLE001 - any failure to pad: exact shapes, still right
                # Structural: no bucket of this graph can work; exact shapes from now on.
                reason = str(e) if isinstance(e, (Unsupported, _C.LoweringError)) else f"{type(e).__name__}: {e}"
                stats.record_bucket_fallback(self.name, reason)
                self.plan = None
                return None
            stats.record_compile(self.name, time.perf_counter() - t0, prog.exe.compile_seconds,
                                 [n[0] for n in prog.spec.nodes], bucketed=True)
            self.bucketed[key] = prog
        try:
            return prog.run(args, real)
        except NoBucket as e:
            stats.record_bucket_fallback(self.name, str(e))
            return None

    def build_ahead(self, example_inputs):
        """Starts building the program for `example_inputs`' signature in the
        background (not for graphs built per shape bucket or in segments)."""
        if (self.segmented is not None or self.replicated is not None or self.plan is not None
                or not compile_ahead_enabled()):
            return
        ex = _example_signature(example_inputs)
        if ex is None:
            return
        sig, metas = ex
        if sig not in self.pending:
            self.pending[sig] = _builder().submit(self._build_from_meta, metas)

    def _build_from_meta(self, metas):
        args = [torch.empty_strided(m[0], m[1], dtype=m[2], device="meta") if isinstance(m, tuple) else m
                for m in metas]
        return self._build(args)

    def _build(self, args):
        """(GraphSpec, GraphExecutable, seconds) for `args`; raises Unsupported
        or LoweringError when the graph cannot become one program."""
        t0 = time.perf_counter()
        spec = GraphSpec(self.gm, args)
        exe = _C._GraphExecutable(self.name, spec.inputs, spec.nodes, spec.outputs, self._program_updates(spec))
        return spec, exe, time.perf_counter() - t0

    def _compile(self, args, sig):
        if self.programs or self.bucketed:
            stats.record_recompile(self.name)
        pending = self.pending.pop(sig, None)
        try:
            spec, exe, seconds = pending.result() if pending is not None else self._build(args)
        except (Unsupported, _C.LoweringError) as e:
            stats.record_eager(self.name, str(e))
            self.programs[sig] = None
            return None
        stats.record_compile(self.name, seconds, exe.compile_seconds, [n[0] for n in spec.nodes])
        self.programs[sig] = (exe, spec)
        return self.programs[sig]

    def _program_updates(self, spec):
        """self.updates as (program input, program output) pairs."""
        updates = []
        for arg, out in self.updates:
            if arg in spec.input_slots and out < len(spec.output_plan) and spec.output_plan[out][0] == "t":
                updates.append((spec.input_slots.index(arg), spec.output_plan[out][1]))
        return updates

    def _run_eager(self, args):
        out = self.gm(*args)
        args.clear()
        return list(out) if isinstance(out, (list, tuple)) else [out]
