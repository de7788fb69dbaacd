"""A compiled graph with collectives (`_c10d_functional.*` and `wait_tensor`
nodes, from DTensor, tensor parallel, compiled FSDP2 or funcol calls).

Where the ranks' devices cannot run one program together (XLA's CPU plugin
across processes: `tpu_dist` carries collectives over gloo), or the graph's
collectives have no one-program form (replicated_graph.py says which), the
graph is cut at each collective into program segments. Each segment is one program,
compiled and cached like a whole graph's (compiled_graph.CompiledGraph); each
collective runs between them through its group's backend, found by the group
name in the node. Segments and collectives run in graph order.

Every rank issues the same programs in the same order: the cut depends only
on the graph's nodes, which Dynamo traced from the same program on every
rank, never on rank-local state (no rank, no timing, no process-group ids).
"""
import operator

import torch
from torch.fx import Graph, GraphModule, Node

_F = torch.ops._c10d_functional

# The functional collectives a graph may hold, and their waits.
COLLECTIVES = frozenset({
    _F.all_reduce.default, _F.all_reduce_coalesced.default, _F.all_gather_into_tensor.default,
    _F.all_gather_into_tensor_coalesced.default, _F.reduce_scatter_tensor.default,
    _F.reduce_scatter_tensor_coalesced.default, _F.all_to_all_single.default, _F.broadcast.default,
    _F.wait_tensor.default,
})


def is_collective(node):
    return node.op == "call_function" and node.target in COLLECTIVES


def has_collectives(gm):
    return any(is_collective(n) for n in gm.graph.nodes)


def _getitem_of_collective(node):
    return (node.op == "call_function" and node.target is operator.getitem
            and isinstance(node.args[0], Node) and is_collective(node.args[0]))


class _Segment:
    """A run of non-collective nodes as a graph of its own."""

    def __init__(self, gm, nodes, make_program, name):
        inside = set(nodes)
        graph = Graph()
        env, self.inputs = {}, []

        def value(n):
            if n not in env:  # defined before this segment: an input
                ph = graph.placeholder(f"in_{len(self.inputs)}")
                ph.meta = dict(n.meta)
                env[n] = ph
                self.inputs.append(n)
            return env[n]

        for n in nodes:
            torch.fx.node.map_arg((n.args, n.kwargs), value)  # inputs first, in order of use
            env[n] = graph.node_copy(n, lambda a: env[a])
        self.outputs = [n for n in nodes if any(u not in inside for u in n.users)]
        graph.output(tuple(env[n] for n in self.outputs))
        self.program = make_program(GraphModule(gm, graph), name)


class SegmentedGraph:
    """The graph as steps: program segments and collectives, in graph order."""

    def __init__(self, gm, name, make_program):
        self.gm = gm
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.constants = {n: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        self.steps = []  # _Segment or a collective Node (with its getitems)
        pending = []

        def close():
            if pending:
                k = sum(isinstance(s, _Segment) for s in self.steps)
                self.steps.append(_Segment(gm, list(pending), make_program, f"{name}.seg{k}"))
                pending.clear()

        for n in gm.graph.nodes:
            if n.op != "call_function":
                continue
            if is_collective(n):
                close()
                self.steps.append(n)
            elif _getitem_of_collective(n):
                self.steps.append(n)  # a host-side pick from a collective's list; the open segment runs after it
            else:
                pending.append(n)
        close()
        self.collective_count = sum(isinstance(s, Node) and is_collective(s) and s.target is not _F.wait_tensor.default
                                    for s in self.steps)
        self._last_use = self._last_uses()

    def _last_uses(self):
        """step index -> the values no later step (or the output) reads."""
        last = {}
        for i, s in enumerate(self.steps):
            for n in (s.inputs if isinstance(s, _Segment) else s.all_input_nodes):
                last[n] = i
        keep = set(self.output.all_input_nodes)
        free = {}
        for n, i in last.items():
            if n not in keep:
                free.setdefault(i, []).append(n)
        return free

    def __call__(self, args):
        env = dict(zip(self.placeholders, args))
        env.update(self.constants)
        args.clear()  # boxed convention: let the inputs die early
        for i, s in enumerate(self.steps):
            if isinstance(s, _Segment):
                results = s.program([env[n] for n in s.inputs])
                env.update(zip(s.outputs, results))
            else:
                a, kw = torch.fx.node.map_arg((s.args, s.kwargs), lambda n: env[n])
                env[s] = s.target(*a, **kw)
            for n in self._last_use.get(i, ()):
                env.pop(n, None)
        out = torch.fx.node.map_arg(self.output.args[0], lambda n: env[n])
        return list(out)
