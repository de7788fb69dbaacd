"""A compiled graph whose collectives stay inside its one program: one
replica per rank, launched once for all the ranks.

Where every rank's device belongs to this process's PJRT client (the device
transport of `tpu_dist`: ranks as threads of launch_in_process, rank r on
tpu:r), a graph with `_c10d_functional` collectives lowers to one StableHLO
module of N replicas (`mhlo.num_replicas` = the world size, replica r on
rank r's device). Each collective node becomes its StableHLO collective over
the replica groups of the c10d group it names
(csrc/lowering/ops/collectives.cpp); `wait_tensor` is the identity.

The program spans the ranks of the graph's one c10d group (the whole world,
or a subgroup: each tensor-parallel group of a 2-D mesh runs its own copy
over its own devices). Each rank calls its graph with its own inputs; the
group's ranks meet in the launch's program rendezvous for that group, and
the last to arrive launches the program once over the group's devices if
every rank brought the same module and input types; each rank takes its
replica's results. Where they differ (ranks running other graphs, or a
constant that depends on the rank), every rank runs that graph in segments
instead, whose collectives then meet one by one (and raise on every rank if
they disagree). A rank that fails or never arrives makes the others raise,
as a collective does.

A graph this cannot express (collectives on two groups, uneven all_to_all
splits, random ops) runs in program segments (collective_segments.py); every
rank decides alike, from the graph alone.
"""
import hashlib
import time

import torch

from .. import _C
from . import stats
from .graph_spec import GraphSpec, Unsupported

_F = torch.ops._c10d_functional

# Where each collective keeps its group name.
_GROUP_ARG = {
    _F.all_reduce.default: 2, _F.all_reduce_coalesced.default: 2, _F.all_gather_into_tensor.default: 2,
    _F.all_gather_into_tensor_coalesced.default: 2, _F.reduce_scatter_tensor.default: 3,
    _F.reduce_scatter_tensor_coalesced.default: 3, _F.all_to_all_single.default: 3, _F.broadcast.default: 2,
}


class ReplicaLayout:
    """The program's replicas: replica i is global rank `ranks[i]` of the
    graph's c10d group `group`, on device `devices[i]`; `groups` maps the
    group's name to its replica groups (all the replicas, in group order)."""

    def __init__(self, group, ranks):
        self.group = group
        self.ranks = ranks
        self.devices = list(ranks)  # launch_in_process: rank r runs on tpu:r
        self.groups = {group: [list(range(len(ranks)))]}


def _device_transport_ranks(name):
    """The global ranks of group `name` if its collectives take the device
    transport (torch_tpu.distributed.transport), else None."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group
    from ..distributed import transport

    try:
        pg = _resolve_process_group(name)
        if transport(pg) != "device":
            return None
    except (ValueError, RuntimeError, KeyError):  # an unknown name, or no tpu_dist backend: not ours
        return None
    return list(dist.get_process_group_ranks(pg))


def replica_layout(gm):
    """The layout for running `gm`'s collectives inside its program, or None
    when they run between program segments: outside a launch_in_process
    rank, collectives on more than one group, or
    TORCH_TPU_COLLECTIVES_IN_PROGRAM=0. The program spans the ranks of the
    graph's one group (the whole world, or a subgroup such as one tensor-
    parallel group of a 2-D mesh): those ranks run it together, and other
    groups' ranks run their own copy over their own devices."""
    from .. import settings
    from ..distributed.in_process import current_launch

    if current_launch() is None or not settings.get("TORCH_TPU_COLLECTIVES_IN_PROGRAM"):
        return None
    names = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in _GROUP_ARG:
            k = _GROUP_ARG[n.target]
            names.add(n.args[k] if k < len(n.args) else n.kwargs.get("group_name"))
    if len(names) != 1 or not isinstance(next(iter(names)), str):
        return None
    name = names.pop()
    ranks = _device_transport_ranks(name)
    return None if ranks is None else ReplicaLayout(name, ranks)


class ReplicatedGraph:
    """Called by CompiledGraph with one rank's boxed arguments."""

    def __init__(self, gm, name, layout, fallback):
        self.gm = gm
        self.name = name
        self.layout = layout
        self.fallback = fallback  # () -> a SegmentedGraph, for a graph that cannot be one program
        self.programs = {}        # input signature -> (executable, spec, key) or None (segments)
        self.segmented = None
        self.collective_count = sum(n.op == "call_function" and n.target in _GROUP_ARG for n in gm.graph.nodes)

    def _build(self, args, sig):
        t0 = time.perf_counter()
        try:
            spec = GraphSpec(self.gm, args)
            exe = _C._GraphExecutable(self.name, spec.inputs, spec.nodes, spec.outputs, [],
                                      (self.layout.devices, self.layout.groups))
        except (Unsupported, _C.LoweringError) as e:
            stats.record_in_program_fallback(self.name, str(e))
            self.programs[sig] = None
            return None
        stats.record_compile(self.name, time.perf_counter() - t0, exe.compile_seconds, [n[0] for n in spec.nodes])
        stats.record_replicated(self.name, self.collective_count)
        key = hashlib.sha256(exe.module_text.encode()).hexdigest()[:16]
        self.programs[sig] = (exe, spec, key)
        return self.programs[sig]

    def __call__(self, args, sig):
        """`args`: materialized (CompiledGraph.__call__ did it)."""
        entry = self.programs.get(sig, False)
        if entry is False:
            entry = self._build(args, sig)
        if entry is None:
            if self.segmented is None:
                self.segmented = self.fallback()
            return self.segmented(args)
        exe, spec, key = entry
        inputs = [args[s] if isinstance(s, int) else s[1] for s in spec.input_slots]
        held = list(args)
        args.clear()

        def launch(payloads):
            if len({(k, types) for k, types, _ in payloads}) > 1:
                # The ranks bring different programs (another graph, other
                # input types, a rank-dependent constant): each runs its
                # graph in segments, whose collectives meet one by one.
                return [None] * len(payloads)
            return exe.run_replicated([p for _, _, p in payloads])

        from ..distributed.in_process import join_program

        layout = self.layout
        types = tuple((str(t.dtype), tuple(t.shape)) for t in inputs)
        results = join_program(f"compiled graph {self.name} (one program of {len(layout.ranks)} replicas)",
                               layout.ranks, layout.group, "program", (key, types, inputs), launch)
        if results is None:
            stats.record_in_program_fallback(
                self.name, "the ranks brought different programs (other graphs or input types, or a constant "
                "that differs by rank, such as a slice at the rank's offset; make it an input to keep one program)")
            self.programs[sig] = None
            return self(held, sig)
        spec.run_effects(results)
        return [results[p[1]] if p[0] == "t" else p[1] for p in spec.output_plan]
