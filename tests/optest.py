"""Table-driven op tests: each row runs on the CPU and on tpu and compares.

A row is an OpCase. For every dtype and every input-shape set of a row, the
harness checks in strict eager: contiguous inputs, non-contiguous inputs (the
same values through a transposed or strided view), the in-place variant when
given, and the out= variant when given. Gradients are compared when `grad` is
set. A second identical call must compile nothing (see op_modes.py).

Every row also runs in the other two modes (op_modes.MODES), over a fixed
sample: its first dtype and its first shape set.
- fused: the same checks inside torch_tpu.eager_mode("fused");
- compile: row.fn, row.inplace and row.out each through
  torch.compile(backend="tpu", dynamic=False), on contiguous inputs (Dynamo
  specialises on strides, so non-contiguous inputs are the same graph code
  under another guard); a row with gradients compares the forward result
  and the gradients from one compiled run. Every Dynamo graph must become
  one program (none may run op by op).
Test ids end in -fused / -compile for those.

The default tier's strict sweep leaves out float16 in a row that also has
bfloat16 and int32 in a row that also has int64 (the same kind of dtype, of
another width: the CI time budget); the heavy tier (TORCH_TPU_HEAVY=1) runs
every dtype of every row. A row that cannot run in a
mode says why in `skip_modes` ({mode: reason}); its test is reported as
skipped with that reason. `graph_ops` names ATen ops the compiled run must
have compiled (rows for the graph-only rules).
"""
import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import op_modes
from torch_tpu import settings

HEAVY = settings.get("TORCH_TPU_HEAVY")
# Default tier: a dtype left out of the strict sweep where its row has this sibling.
_SIBLING = {torch.float16: torch.bfloat16, torch.int32: torch.int64}


def strict_dtypes(dtypes):
    """The dtypes of a row's strict sweep in this tier (module docstring)."""
    if HEAVY:
        return tuple(dtypes)
    return tuple(d for d in dtypes if _SIBLING.get(d) not in dtypes)

FLOAT = (torch.float32,)
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64)
ALL = FLOATS + INTS + (torch.bool,)
NUMERIC = FLOATS + INTS + (torch.uint8, torch.int8, torch.int16, torch.float64)

# Tolerances follow PyTorch's own defaults per dtype (torch.testing).
TOL = {
    torch.float32: (1.3e-6 * 4, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1.6e-2, 1e-5 * 100),
    torch.float16: (1e-3, 1e-5 * 10),
}


@dataclass
class OpCase:
    name: str
    fn: Callable                       # fn(*tensors) -> Tensor or tuple
    shapes: Sequence[Sequence[tuple]]  # list of input-shape lists
    dtypes: Sequence[torch.dtype] = FLOAT
    inplace: Optional[Callable] = None  # fn_(*tensors): mutates the first
    out: Optional[Callable] = None      # fn(*tensors, out=t)
    grad: bool = False
    low: float = -3.0
    high: float = 3.0
    rtol: Optional[float] = None
    atol: Optional[float] = None
    make: Optional[Callable] = None     # make(shape, dtype, index) -> CPU tensor
    noncontiguous: bool = True
    # {mode: why this row cannot run in it}: the row's tests in that mode are
    # reported as skipped with the reason.
    skip_modes: Mapping[str, str] = field(default_factory=dict)
    # ATen ops (e.g. "aten::view_copy") that the compiled-mode run must have
    # compiled into a program: rows for rules that only graphs use.
    graph_ops: Sequence[str] = ()
    # The mode this instance runs in; set by parametrize(), not by rows.
    mode: str = "strict"

    def __str__(self):
        return self.name


def make_tensor(shape, dtype, low, high, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype.is_complex:  # real and imaginary parts each in [low, high)
        parts = torch.rand(tuple(shape) + (2,), generator=g, dtype=torch.float64) * (high - low) + low
        return torch.view_as_complex(parts).to(dtype)
    lo, hi = int(low), max(int(high), int(low) + 1)
    if dtype == torch.uint8:
        lo = max(lo, 0)
        hi = max(hi, 1)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def noncontiguous_copy(t):
    """The same values as `t`, through a non-contiguous view."""
    if t.dim() == 0 or t.numel() == 0:
        return t
    if t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return torch.stack([t, t], dim=-1)[..., 0]


def assert_close(actual, expected, dtype, rtol=None, atol=None):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, dtype, rtol, atol)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert actual.device.type == "tpu", f"result is on {actual.device}, expected tpu"
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    r, a = TOL.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual, expected, rtol=rtol if rtol is not None else r,
                               atol=atol if atol is not None else a, equal_nan=True)


def _inputs(case, shapes, dtype):
    if case.make:
        return [case.make(s, dtype, i) for i, s in enumerate(shapes)]
    return [make_tensor(s, dtype, case.low, case.high, seed=i + 7 * len(s)) for i, s in enumerate(shapes)]


def _to_tpu(xs, noncontig=False):
    out = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            y = x.to("tpu")
            out.append(noncontiguous_copy(y) if noncontig else y)
        else:
            out.append(x)
    return out


def run_case(case, shapes, dtype):
    """Every check of one (row, dtype, shapes) in the mode `case.mode`."""
    xs = _inputs(case, shapes, dtype)
    expected = case.fn(*xs)
    grad = case.grad and dtype.is_floating_point
    with op_modes.running(case.mode) as mode:
        # Compiled: the gradient run compares the forward result too (one
        # Dynamo trace instead of two).
        if not (grad and mode.name == "compile"):
            _check_forward(case, mode, xs, expected, dtype)
        if case.inplace:
            _check_inplace(case, mode, xs, dtype)
        if case.out and isinstance(expected, torch.Tensor):
            _check_out(case, mode, xs, expected, dtype)
        if grad:
            check_grad(case, xs, dtype, mode)
        mode.assert_compiled(case.graph_ops)


def _check_forward(case, mode, xs, expected, dtype):
    fn = mode.wrap(case.fn)
    dev = mode.settle(_to_tpu(xs))
    assert_close(fn(*dev), expected, dtype, case.rtol, case.atol)
    mode.assert_repeat_compiles_nothing(lambda: fn(*dev))
    if case.noncontiguous and mode.name != "compile":
        assert_close(fn(*_to_tpu(xs, noncontig=True)), expected, dtype, case.rtol, case.atol)


def _check_inplace(case, mode, xs, dtype):
    cpu = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
    try:
        case.inplace(*cpu)
    except RuntimeError:
        return  # in-place not valid for these dtypes/shapes on the CPU either
    fn = mode.wrap(case.inplace)
    dev = mode.settle(_to_tpu(xs))
    ret = fn(*dev)
    assert ret is dev[0], "in-place op must return its first argument"
    assert_close(dev[0], cpu[0], dtype, case.rtol, case.atol)


def _check_out(case, mode, xs, expected, dtype):
    # Eager modes start from an empty out= tensor (the op resizes it); a
    # compiled graph gets one of the result's shape, as compiled code does.
    shape = expected.shape if mode.name == "compile" else (0,)
    out = torch.empty(shape, dtype=expected.dtype, device="tpu")
    fn = mode.wrap(case.out)
    fn(*mode.settle(_to_tpu(xs)), out=out)
    assert_close(out, expected, dtype, case.rtol, case.atol)


def check_grad(case, xs, dtype, mode=None):
    mode = mode or op_modes.Mode("strict")
    fn = mode.wrap(case.fn)

    def leaves(device):
        return [x.detach().to(device).requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x
                for x in xs]

    def forward_backward(args, g):
        out = fn(*args)
        first = out[0] if isinstance(out, (tuple, list)) else out
        first.backward(g)
        return out, [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]

    cpu = leaves("cpu")
    out_c = case.fn(*cpu)
    first = out_c[0] if isinstance(out_c, (tuple, list)) else out_c
    g = make_tensor(first.shape, first.dtype, -1, 1, seed=99)
    first.backward(g)
    g_dev = mode.settle([g.to("tpu")])[0]
    dev = mode.settle(leaves("tpu"))
    out_d, grads = forward_backward(dev, g_dev)
    assert_close(out_d, out_c, dtype, case.rtol, case.atol)
    for c, d in zip([c for c in cpu if isinstance(c, torch.Tensor) and c.requires_grad], grads):
        assert d is not None, "no gradient reached the tpu input"
        assert_close(d, c.grad, dtype, case.rtol, case.atol)
    again = mode.settle(leaves("tpu"))
    mode.assert_repeat_compiles_nothing(lambda: forward_backward(again, g_dev))


def parametrize(cases):
    """pytest parameters (case, shapes, dtype) for a table of OpCases: every
    dtype and shape set in strict eager, and the sample (module docstring)
    in the other modes."""
    params = []
    for case in cases:
        bad = [m for m in case.skip_modes if m not in op_modes.MODES]
        assert not bad, f"{case.name}: skip_modes names unknown modes {bad}"
        for mode in op_modes.MODES:
            variant = case if mode == "strict" else dataclasses.replace(case, mode=mode)
            dtypes = strict_dtypes(case.dtypes) if mode == "strict" else case.dtypes[:1]
            shape_sets = case.shapes if mode == "strict" else case.shapes[:1]
            marks = [pytest.mark.skip(reason=f"{mode}: {case.skip_modes[mode]}")] if mode in case.skip_modes else []
            for dtype in dtypes:
                for shapes in shape_sets:
                    sid = "x".join("-".join(map(str, s)) or "scalar" for s in shapes) or "noargs"
                    suffix = "" if mode == "strict" else f"-{mode}"
                    params.append(pytest.param(variant, shapes, dtype, marks=marks,
                                               id=f"{case.name}-{str(dtype)[6:]}-{sid}{suffix}"))
    return pytest.mark.parametrize("case,shapes,dtype", params)


def same_error(fn, *args):
    """fn raises the same exception type on the CPU and on tpu."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(cpu.type):
        fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])


class AtenOpLog(TorchDispatchMode):
    """Records the ATen ops a block dispatches (overload packet names, in
    order): `with AtenOpLog() as log: ...; assert "_grouped_mm" in log.ops`."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))
