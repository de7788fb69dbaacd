"""The graph-only rules (TT_GRAPH_RULE: views as values, *_scatter, factories,
conversions, convolution's ATen forms), which eager mode never runs.

Two ways in:
- OpCase rows whose code makes Dynamo and AOTAutograd emit these ops; in
  compiled mode `graph_ops` asserts the program contains them (strict and
  fused eager run the same code through views and eager factories);
- a one-node FX graph per rule name, run by the compiler's CompiledGraph
  exactly as torch.compile's graphs are, for every graph-only rule,
  including the ones AOTAutograd never emits (it decomposes
  `contiguous`, and functionalization turns `lift_fresh` into
  `lift_fresh_copy`). A test checks that every graph-only rule has a
  one-node entry.
"""
import operator

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.compiler.compiled_graph import CompiledGraph

from optest import FLOAT, INTS, OpCase, assert_close, make_tensor, parametrize, run_case

aten = torch.ops.aten
prims = torch.ops.prims


def scatter_slice(x, src):
    y = x.clone()
    y[1:5:2] = src
    return y


def scatter_select(x, src):
    y = x.clone()
    y[:, 2] = src
    return y


def scale_diagonal(x):
    y = x.clone()
    y.diagonal(-1).mul_(3)
    return y


CASES = [
    OpCase("view_then_mul", lambda x: x.view(4, 3) * 2, [[(3, 4)]], FLOAT, grad=True, noncontiguous=False,
           graph_ops=("aten::view",)),
    OpCase("reshape_of_transpose", lambda x: x.t().reshape(12) + 1, [[(3, 4)]], FLOAT, grad=True,
           graph_ops=("aten::_unsafe_view",)),
    OpCase("unsqueeze_squeeze", lambda x: x.unsqueeze(1).squeeze(0) * 3, [[(1, 4)]], FLOAT, grad=True,
           graph_ops=("aten::unsqueeze", "aten::squeeze.dim")),
    OpCase("squeeze_all", lambda x: x.squeeze() + 1, [[(1, 3, 1)]], FLOAT, graph_ops=("aten::squeeze",)),
    OpCase("squeeze_dims", lambda x: x.squeeze((0, 2)) + 1, [[(1, 3, 1)]], FLOAT, graph_ops=("aten::squeeze.dims",)),
    OpCase("expand", lambda x: x.expand(3, 4) * x, [[(3, 1)]], FLOAT, grad=True, graph_ops=("aten::expand",)),
    OpCase("permute", lambda x: x.permute(2, 0, 1) - 1, [[(2, 3, 4)]], FLOAT + INTS, grad=True,
           graph_ops=("aten::permute",)),
    OpCase("t", lambda x: x.t() * 2, [[(3, 4)]], FLOAT, grad=True, graph_ops=("aten::t",)),
    OpCase("transpose", lambda x: x.transpose(0, 2) * 2, [[(2, 3, 4)]], FLOAT, grad=True,
           graph_ops=("aten::transpose.int",)),
    OpCase("slice_step", lambda x: x[1:5:2, -3:] * 2, [[(5, 4)]], FLOAT, grad=True,
           graph_ops=("aten::slice.Tensor",)),
    OpCase("select", lambda x: x[:, -1] + x[0], [[(4, 4)]], FLOAT + INTS, grad=True,
           graph_ops=("aten::select.int",)),
    OpCase("split", lambda x: [p * 2 for p in x.split(2)], [[(5, 4)]], FLOAT, graph_ops=("aten::split.Tensor",)),
    OpCase("split_sizes", lambda x: [p * 2 for p in x.split([1, 3], 1)], [[(5, 4)]], FLOAT,
           graph_ops=("aten::split_with_sizes",)),
    OpCase("unbind", lambda x: [p + 1 for p in x.unbind(1)], [[(3, 4)]], FLOAT, graph_ops=("aten::unbind.int",)),
    OpCase("diagonal", lambda x: x.diagonal(1) * 2, [[(3, 4)]], FLOAT, grad=True, graph_ops=("aten::diagonal",)),
    OpCase("diagonal_write", scale_diagonal, [[(4, 3)]], FLOAT, grad=True,
           graph_ops=("aten::diagonal_scatter",)),
    OpCase("diagonal_bool", lambda x: x.diagonal(-1, 0, 2) & True, [[(4, 2, 3)]], (torch.bool,),
           graph_ops=("aten::diagonal",)),
    OpCase("slice_scatter_setitem", scatter_slice, [[(6, 3), (2, 3)]], FLOAT, grad=True,
           graph_ops=("aten::slice_scatter",)),
    OpCase("select_scatter_setitem", scatter_select, [[(3, 4), (3,)]], FLOAT, grad=True,
           graph_ops=("aten::select_scatter",)),
    OpCase("zeros_ones_full", lambda x: x + torch.zeros(3, 4, device=x.device) + torch.ones(4, device=x.device)
           + torch.full((3, 1), 2.5, device=x.device), [[(3, 4)]], FLOAT,
           graph_ops=("aten::zeros", "aten::ones", "aten::full")),
    OpCase("likes", lambda x: torch.zeros_like(x) + torch.ones_like(x) * torch.full_like(x, 3) - x,
           [[(3, 4)]], FLOAT + INTS, graph_ops=("aten::zeros_like", "aten::ones_like", "aten::full_like")),
    OpCase("new_factories", lambda x: x.new_zeros(4) + x.new_ones(4) + x.new_full((4,), 2) + x, [[(3, 4)]],
           FLOAT, graph_ops=("aten::new_zeros", "aten::new_ones", "aten::new_full")),
    OpCase("empty_then_fill", lambda x: torch.empty(3, 4, device=x.device).fill_(2) * x
           + torch.empty_like(x).fill_(1), [[(3, 4)]], FLOAT,
           graph_ops=("aten::empty.memory_format", "aten::empty_like")),
    OpCase("new_empty_then_fill", lambda x: x.new_empty((4,)).fill_(1) + x, [[(3, 4)]], FLOAT,
           graph_ops=("aten::new_empty",)),
    OpCase("empty_strided_then_fill", lambda x: torch.empty_strided((3, 4), (4, 1), device=x.device).fill_(1) + x,
           [[(3, 4)]], FLOAT, graph_ops=("aten::empty_strided",)),
    OpCase("scalar_tensor", lambda x: x * torch.scalar_tensor(2.5, device=x.device), [[(3, 4)]], FLOAT,
           graph_ops=("aten::scalar_tensor",)),
    OpCase("to_dtype", lambda x: x.to(torch.float16) * 2, [[(3, 4)]], FLOAT + INTS,
           graph_ops=("aten::_to_copy",)),
    OpCase("to_dtype_grad", lambda x: x.to(torch.float64).sin(), [[(3, 4)]], FLOAT, grad=True,
           graph_ops=("aten::_to_copy",)),
    OpCase("constant_tensor", lambda x: x + torch.tensor([1.0, 2.0, 3.0, 4.0], device=x.device), [[(3, 4)]],
           FLOAT, graph_ops=("aten::lift_fresh_copy",)),
    OpCase("conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1), [[(2, 3, 5, 5), (4, 3, 3, 3), (4,)]], FLOAT,
           grad=True, rtol=1e-4, atol=1e-4, graph_ops=("aten::convolution", "aten::convolution_backward")),
    # Explicit *_copy ops: what functionalised view code calls.
    OpCase("view_copy", lambda x: aten.view_copy(x, [4, 3]) * 2, [[(3, 4)]], FLOAT, grad=True,
           graph_ops=("aten::view_copy",)),
    OpCase("permute_copy", lambda x: aten.permute_copy(x, [1, 0]) * 2, [[(3, 4)]], FLOAT,
           graph_ops=("aten::permute_copy",)),
    OpCase("transpose_copy", lambda x: aten.transpose_copy(x, 0, 1) * 2, [[(3, 4)]], FLOAT,
           graph_ops=("aten::transpose_copy.int",)),
    OpCase("slice_copy", lambda x: aten.slice_copy(x, 1, 1, 4, 2) * 2, [[(3, 4)]], FLOAT,
           graph_ops=("aten::slice_copy.Tensor",)),
    OpCase("select_copy", lambda x: aten.select_copy(x, 0, 1) * 2, [[(3, 4)]], FLOAT,
           graph_ops=("aten::select_copy.int",)),
    OpCase("expand_copy", lambda x: aten.expand_copy(x, [3, 4]) * 2, [[(3, 1)]], FLOAT,
           graph_ops=("aten::expand_copy",)),
    OpCase("diagonal_copy", lambda x: aten.diagonal_copy(x) * 2, [[(3, 4)]], FLOAT,
           graph_ops=("aten::diagonal_copy",)),
    OpCase("unsqueeze_squeeze_copy", lambda x: aten.squeeze_copy(aten.unsqueeze_copy(x, 0)) * 2, [[(3, 4)]],
           FLOAT, graph_ops=("aten::unsqueeze_copy", "aten::squeeze_copy")),
    OpCase("t_copy", lambda x: aten.t_copy(x) * 2, [[(3, 4)]], FLOAT, graph_ops=("aten::t_copy",)),
    OpCase("split_copy", lambda x: [p * 2 for p in aten.split_copy(x, 2)], [[(5, 4)]], FLOAT,
           graph_ops=("aten::split_copy.Tensor",)),
    OpCase("split_with_sizes_copy", lambda x: [p * 2 for p in aten.split_with_sizes_copy(x, [1, 3], 1)],
           [[(5, 4)]], FLOAT, graph_ops=("aten::split_with_sizes_copy",)),
    OpCase("unbind_copy", lambda x: [p * 2 for p in aten.unbind_copy(x, 1)], [[(3, 4)]], FLOAT,
           graph_ops=("aten::unbind_copy.int",)),
    OpCase("alias_detach_copy", lambda x: aten.alias_copy(x) * aten.detach_copy(x), [[(3, 4)]], FLOAT,
           graph_ops=("aten::alias_copy", "aten::detach_copy")),
    OpCase("addcmul_inplace_value", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [[(3, 4), (3, 4), (4,)]],
           FLOAT, inplace=lambda a, b, c: a.addcmul_(b, c, value=0.5), graph_ops=("prims::fma",)),
    OpCase("addcdiv_inplace_value", lambda a, b, c: torch.addcdiv(a, b, c, value=-2), [[(3, 4), (3, 4), (4,)]],
           FLOAT, low=0.5, inplace=lambda a, b, c: a.addcdiv_(b, c, value=-2), graph_ops=("prims::fma",)),
    OpCase("convert_element_type", lambda x: prims.convert_element_type(x, torch.int32) + 1, [[(3, 4)]], FLOAT,
           graph_ops=("prims::convert_element_type",)),
]


@parametrize(CASES)
def test_graph_rule_rows(case, shapes, dtype):
    run_case(case, shapes, dtype)


# ---- one-node graphs -------------------------------------------------------------


class T:
    """A tensor argument: its shape, dtype and seed."""

    def __init__(self, *shape, dtype=torch.float32, seed=0):
        self.shape, self.dtype, self.seed = shape, dtype, seed

    def make(self, device):
        return make_tensor(self.shape, self.dtype, -3, 3, self.seed).to(device)


DEV = object()  # the device argument of a factory
F32 = {"dtype": torch.float32, "device": DEV}
UNDEFINED = "values undefined"  # empty*: only the shape and dtype are compared

# (rule name, op, positional arguments, keyword arguments, what to compare)
ONE_NODE = [
    ("aten::view", aten.view.default, (T(3, 4), [4, 3]), {}),
    ("aten::_unsafe_view", aten._unsafe_view.default, (T(3, 4), [2, 6]), {}),
    ("aten::view_copy", aten.view_copy.default, (T(3, 4), [12]), {}),
    ("aten::_reshape_alias", aten._reshape_alias.default, (T(3, 4), [4, 3], [3, 1]), {}),
    ("aten::squeeze", aten.squeeze.default, (T(1, 3, 1),), {}),
    ("aten::squeeze.dim", aten.squeeze.dim, (T(1, 3, 1), 2), {}),
    ("aten::squeeze.dims", aten.squeeze.dims, (T(1, 3, 1), [0, 2]), {}),
    ("aten::squeeze_copy", aten.squeeze_copy.default, (T(1, 3, 1),), {}),
    ("aten::unsqueeze", aten.unsqueeze.default, (T(3, 4), -1), {}),
    ("aten::unsqueeze_copy", aten.unsqueeze_copy.default, (T(3, 4), 0), {}),
    ("aten::alias", aten.alias.default, (T(3, 4),), {}),
    ("aten::alias_copy", aten.alias_copy.default, (T(3, 4),), {}),
    ("aten::detach", aten.detach.default, (T(3, 4),), {}),
    ("aten::detach_copy", aten.detach_copy.default, (T(3, 4),), {}),
    ("aten::lift", aten.lift.default, (T(3, 4),), {}),
    ("aten::lift_fresh", aten.lift_fresh.default, (T(3, 4),), {}),
    ("aten::lift_fresh_copy", aten.lift_fresh_copy.default, (T(3, 4),), {}),
    ("aten::contiguous", aten.contiguous.default, (T(3, 4, dtype=torch.int64),), {}),
    ("aten::expand", aten.expand.default, (T(3, 1), [2, 3, 4]), {}),
    ("aten::expand_copy", aten.expand_copy.default, (T(3, 1), [3, -1]), {}),
    ("aten::permute", aten.permute.default, (T(2, 3, 4), [2, 0, 1]), {}),
    ("aten::permute_copy", aten.permute_copy.default, (T(2, 3, 4), [-1, 1, 0]), {}),
    ("aten::t", aten.t.default, (T(3, 4),), {}),
    ("aten::t_copy", aten.t_copy.default, (T(4),), {}),
    ("aten::transpose.int", aten.transpose.int, (T(2, 3, 4), 0, 2), {}),
    ("aten::transpose_copy.int", aten.transpose_copy.int, (T(2, 3, 4), -1, 1), {}),
    ("aten::slice.Tensor", aten.slice.Tensor, (T(5, 4), 0, 1, 5, 2), {}),
    ("aten::slice_copy.Tensor", aten.slice_copy.Tensor, (T(5, 4), 1, -3, 100, 1), {}),
    ("aten::select.int", aten.select.int, (T(3, 4), 1, -1), {}),
    ("aten::select_copy.int", aten.select_copy.int, (T(3, 4), 0, 2), {}),
    ("aten::split.Tensor", aten.split.Tensor, (T(5, 4), 2), {}),
    ("aten::split_copy.Tensor", aten.split_copy.Tensor, (T(5, 4), 3, 1), {}),
    ("aten::split_with_sizes", aten.split_with_sizes.default, (T(5, 4), [1, 3], 1), {}),
    ("aten::split_with_sizes_copy", aten.split_with_sizes_copy.default, (T(5, 4), [2, 3]), {}),
    ("aten::unbind.int", aten.unbind.int, (T(3, 4), 1), {}),
    ("aten::unbind_copy.int", aten.unbind_copy.int, (T(3, 4),), {}),
    ("aten::diagonal", aten.diagonal.default, (T(3, 4), 1), {}),
    ("aten::diagonal", aten.diagonal.default, (T(4, 2, 3, dtype=torch.bool), -1, 0, 2), {}),
    ("aten::diagonal_copy", aten.diagonal_copy.default, (T(2, 3, 4, dtype=torch.int32), 0, 1, 2), {}),
    ("aten::slice_scatter", aten.slice_scatter.default, (T(5, 4), T(2, 4, seed=1), 0, 1, 5, 2), {}),
    ("aten::select_scatter", aten.select_scatter.default, (T(3, 4), T(3, seed=1), 1, -1), {}),
    ("aten::diagonal_scatter", aten.diagonal_scatter.default, (T(3, 4), T(3, seed=1), 1), {}),
    ("aten::diagonal_scatter", aten.diagonal_scatter.default, (T(2, 4, 3), T(4, 2, seed=1), -1, 2, 0), {}),
    ("aten::empty.memory_format", aten.empty.memory_format, ([2, 3],), F32, UNDEFINED),
    ("aten::empty_strided", aten.empty_strided.default, ([2, 3], [3, 1]), F32, UNDEFINED),
    ("aten::empty_like", aten.empty_like.default, (T(2, 3),), {}, UNDEFINED),
    ("aten::new_empty", aten.new_empty.default, (T(2, 3), [4]), {}, UNDEFINED),
    ("aten::new_empty_strided", aten.new_empty_strided.default, (T(2, 3), [4], [1]), {}, UNDEFINED),
    ("aten::zeros", aten.zeros.default, ([2, 3],), F32),
    ("aten::zeros_like", aten.zeros_like.default, (T(2, 3, dtype=torch.int32),), {}),
    ("aten::new_zeros", aten.new_zeros.default, (T(2, 3), [4]), {}),
    ("aten::ones", aten.ones.default, ([2, 3],), {"dtype": torch.int64, "device": DEV}),
    ("aten::ones_like", aten.ones_like.default, (T(2, 3),), {}),
    ("aten::new_ones", aten.new_ones.default, (T(2, 3), [4]), {"dtype": torch.bool}),
    ("aten::full", aten.full.default, ([2, 3], 1.5), F32),
    ("aten::full_like", aten.full_like.default, (T(2, 3, dtype=torch.int32), 7), {}),
    ("aten::new_full", aten.new_full.default, (T(2, 3), [4], 3.5), {}),
    ("aten::scalar_tensor", aten.scalar_tensor.default, (2.5,), F32),
    ("aten::sort", aten.sort.default, (T(3, 5),), {}),
    ("aten::sort", aten.sort.default, (T(4, 3, dtype=torch.int32), 0, True), {}),
    ("prims::fma", "fma", (T(3, 4), T(4, seed=1), T(3, 1, seed=2)), {}),
    ("prims::fma", "fma", (T(3, 4, dtype=torch.bfloat16), 0.5, T(3, 4, dtype=torch.bfloat16, seed=2)), {}),
    ("aten::_to_copy", aten._to_copy.default, (T(2, 3),), {"dtype": torch.float16}),
    ("prims::convert_element_type", prims.convert_element_type.default, (T(2, 3), torch.int32), {}),
    ("prims::div", prims.div.default, (T(3, 4), T(3, 4, seed=1)), {}),
    ("prims::div", prims.div.default, (T(2, 3, dtype=torch.bfloat16), T(2, 3, dtype=torch.bfloat16, seed=1)), {}),
    ("aten::view_as_real", aten.view_as_real.default, (T(3, 4, dtype=torch.complex64),), {}),
    ("aten::view_as_real_copy", aten.view_as_real_copy.default, (T(2, dtype=torch.complex128),), {}),
    ("aten::view.dtype", aten.view.dtype, (T(3, 8),), {"dtype": torch.int32}),
    ("aten::view.dtype", aten.view.dtype, (T(2, 4, dtype=torch.bfloat16), torch.float32), {}),
    ("aten::view.dtype", aten.view.dtype, (T(2, 3, dtype=torch.float64), torch.uint8), {}),
    ("aten::view_copy.dtype", aten.view_copy.dtype, (T(4, 2), torch.complex64), {}),
    ("aten::view_as_complex", aten.view_as_complex.default, (T(3, 2),), {}),
    ("aten::view_as_complex_copy", aten.view_as_complex_copy.default, (T(4, 3, 2, dtype=torch.float64),), {}),
    ("aten::_conj", aten._conj.default, (T(3, 4, dtype=torch.complex64),), {}),
    ("aten::_conj_copy", aten._conj_copy.default, (T(5, dtype=torch.complex128),), {}),
    ("aten::_neg_view", aten._neg_view.default, (T(3, 4, dtype=torch.complex64),), {}),
    ("aten::_neg_view_copy", aten._neg_view_copy.default, (T(3, 4),), {}),
    ("aten::convolution", aten.convolution.default,
     (T(1, 2, 5, 5), T(3, 2, 3, 3, seed=1), T(3, seed=2), [1, 1], [1, 0], [1, 1], False, [0, 0], 1), {}),
    ("aten::convolution_backward", aten.convolution_backward.default,
     (T(1, 3, 3, 3, seed=3), T(1, 2, 5, 5), T(3, 2, 3, 3, seed=1), [3], [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
      [True, True, True]), {}),
]


def _one_node_graph(op, args, kwargs, device):
    """A GraphModule calling `op` once, with every tensor argument a
    placeholder; returns it and the tensors to call it with."""
    graph, inputs = torch.fx.Graph(), []

    def lift(v):
        if isinstance(v, T):
            inputs.append(v.make(device))
            return graph.placeholder(f"x{len(inputs)}")
        if v is DEV:
            return torch.device(device)
        if isinstance(v, (list, tuple)):
            return type(v)(lift(x) for x in v)
        return v

    node = graph.call_function(op, lift(args), {k: lift(v) for k, v in kwargs.items()})
    return graph, node, inputs


def _realize(v, device):
    if isinstance(v, T):
        return v.make(device)
    if v is DEV:
        return torch.device(device)
    if isinstance(v, (list, tuple)):
        return type(v)(_realize(x, device) for x in v)
    return v


def _ids():
    seen = {}
    out = []
    for entry in ONE_NODE:
        seen[entry[0]] = seen.get(entry[0], 0) + 1
        out.append(entry[0] + ("" if seen[entry[0]] == 1 else f"-{seen[entry[0]]}"))
    return out


@pytest.mark.parametrize("entry", ONE_NODE, ids=_ids())
def test_graph_rule_in_a_one_node_graph(entry):
    name, op, args, kwargs = entry[:4]
    if op == "fma":  # Dynamo's prim: defined once torch._inductor's prims are imported
        from torch._inductor import inductor_prims
        op = inductor_prims.fma
    compare = entry[4] if len(entry) > 4 else "values"
    expected = op(*_realize(args, "cpu"), **{k: _realize(v, "cpu") for k, v in kwargs.items()})
    many = isinstance(expected, (list, tuple))
    graph, node, inputs = _one_node_graph(op, args, kwargs, "tpu")
    graph.output([graph.call_function(operator.getitem, (node, i)) for i in range(len(expected))] if many
                 else [node])
    graph.lint()
    before = torch_tpu.compile_stats()
    results = CompiledGraph(torch.fx.GraphModule(torch.nn.Module(), graph), f"one_node_{name}")(list(inputs))
    after = torch_tpu.compile_stats()
    assert not set(after["eager_graphs"]) - set(before["eager_graphs"]), after["eager_graphs"]
    assert after["op_counts"].get(name, 0) > before["op_counts"].get(name, 0), f"{name} was not compiled"
    expected = list(expected) if many else [expected]
    assert len(results) == len(expected)
    for r, e in zip(results, expected):
        if compare == UNDEFINED:
            assert r.device.type == "tpu" and r.dtype == e.dtype and r.shape == e.shape
        else:
            assert_close(r, e, e.dtype)


# Graph-only rules a one-node graph cannot show, and the test that does.
TESTED_ELSEWHERE = {
    "aten::_assert_async": "test_assert_async_in_a_graph_is_a_device_check",
    "aten::_assert_async.msg": "test_assert_async_in_a_graph_is_a_device_check",
    # a program of one replica per rank: tests/test_dist_compiled_in_program.py
    **{f"_c10d_functional::{c}": "tests/test_dist_compiled_in_program.py" for c in (
        "all_reduce", "all_reduce_coalesced", "all_gather_into_tensor", "all_gather_into_tensor_coalesced",
        "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "all_to_all_single", "broadcast",
        "wait_tensor")},
}


def test_every_graph_only_rule_has_a_one_node_graph():
    graph_only = set(torch_tpu._C._graph_rule_names()) - set(torch_tpu.lowered_ops())
    assert graph_only - {e[0] for e in ONE_NODE} - set(TESTED_ELSEWHERE) == set()


@pytest.mark.parametrize("msg", [True, False])
def test_assert_async_in_a_graph_is_a_device_check(msg):
    """The graph stays one program; a zero raises PyTorch's RuntimeError
    (its message) when the host next waits, a nonzero passes."""
    graph = torch.fx.Graph()
    x, flag = graph.placeholder("x"), graph.placeholder("flag")
    args = (flag, "index out of range in one_hot") if msg else (flag,)
    graph.call_function(aten._assert_async.msg if msg else aten._assert_async.default, args)
    graph.output([graph.call_function(aten.add.Tensor, (x, x))])
    cg = CompiledGraph(torch.fx.GraphModule(torch.nn.Module(), graph), f"assert_async_{msg}")
    before = torch_tpu.compile_stats()
    x = torch.arange(3.0, device="tpu")
    out = cg([x, torch.tensor(True, device="tpu")])
    assert_close(out[0], torch.arange(3.0) * 2, torch.float32)
    cg([x, torch.tensor(2, device="tpu")])[0].cpu()  # nonzero int: passes
    assert not torch_tpu.compile_stats()["eager_graphs"].keys() - before["eager_graphs"].keys()
    want = "index out of range in one_hot" if msg else "Expected Tensor with single nonzero value, but got zero"
    with pytest.raises(RuntimeError, match=want):
        cg([x, torch.tensor(0.0, device="tpu")])[0].cpu()


def test_assert_scalar_on_sizes_is_decided_when_the_graph_is_built():
    """torch._check on a dynamic size becomes aten::_assert_scalar in the
    graph: a host value, decided for the sizes the program is built for, so
    the graph stays one program and a size that fails the check raises."""
    def f(x):
        torch._check(x.shape[0] >= 2)
        return (x * 2).sum(0)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    before = torch_tpu.compile_stats()
    for n in (3, 5):
        x = torch.arange(n * 4.0).view(n, 4)
        assert_close(compiled(x.to("tpu")), f(x), torch.float32)
    assert not torch_tpu.compile_stats()["eager_graphs"].keys() - before["eager_graphs"].keys()
    with pytest.raises(RuntimeError):
        compiled(torch.ones(1, 4, device="tpu")).cpu()
