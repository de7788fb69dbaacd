"""Activations and their backward ops: relu, threshold, gelu (erf and tanh),
silu, mish, hardtanh/relu6, leaky_relu, elu/selu/celu, softplus, hardswish,
hardsigmoid. grad=True rows exercise the *_backward rules."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOATS, INTS, OpCase, parametrize, run_case

SHAPES = [[(3, 4)], [(2, 3, 5)], [()], [(0, 3)]]


def with_edges(shape, dtype, i):
    """Random values plus the kink points (0, +-1, +-3) that activations special-case."""
    g = torch.Generator().manual_seed(i)
    t = (torch.rand(shape, generator=g, dtype=torch.float64) * 8 - 4).to(dtype)
    if t.numel() >= 7 and dtype.is_floating_point:
        flat = t.view(-1)
        for k, v in enumerate([0.0, 1.0, -1.0, 3.0, -3.0, -0.0, 0.5]):
            flat[k] = v
    return t


def act(name, fn, dtypes=FLOATS, inplace=None, out=None, **kw):
    return OpCase(name, fn, SHAPES, dtypes, inplace=inplace, out=out, grad=True, make=with_edges, **kw)


CASES = [
    act("relu", torch.relu, FLOATS + INTS, inplace=torch.relu_),
    act("relu_functional_inplace", lambda a: F.relu(a), inplace=lambda a: F.relu(a, inplace=True)),
    act("threshold", lambda a: F.threshold(a, 0.5, -1.0), FLOATS + INTS,
        inplace=lambda a: F.threshold(a, 0.5, -1.0, inplace=True)),
    act("gelu", F.gelu),
    act("gelu_tanh", lambda a: F.gelu(a, approximate="tanh")),
    act("silu", F.silu, inplace=lambda a: F.silu(a, inplace=True)),
    OpCase("mish", F.mish, SHAPES, FLOATS, make=with_edges),
    # mish_backward is CompositeImplicitAutograd: on tpu it runs as f16 ops that
    # round after each step, while the CPU kernel computes in f32, so the
    # gradient is compared for f32/bf16 only
    OpCase("mish_grad", F.mish, SHAPES[:2], (torch.float32, torch.bfloat16), make=with_edges, grad=True),
    act("sigmoid", torch.sigmoid, inplace=torch.sigmoid_),
    act("tanh", torch.tanh, inplace=torch.tanh_),
    act("hardtanh", F.hardtanh, FLOATS + INTS, inplace=lambda a: F.hardtanh(a, inplace=True)),
    act("hardtanh_range", lambda a: F.hardtanh(a, -2.0, 0.5)),
    act("relu6", F.relu6),
    act("leaky_relu", F.leaky_relu, inplace=lambda a: F.leaky_relu(a, inplace=True)),
    act("leaky_relu_slope", lambda a: F.leaky_relu(a, 0.2)),
    act("elu", F.elu, inplace=lambda a: F.elu(a, inplace=True)),
    act("elu_alpha", lambda a: F.elu(a, alpha=0.5)),
    act("selu", F.selu),
    act("celu", lambda a: F.celu(a, alpha=1.5)),
    act("softplus", F.softplus),
    act("softplus_beta", lambda a: F.softplus(a, beta=2.0, threshold=3.0)),
    act("hardswish", F.hardswish),
    act("hardsigmoid", F.hardsigmoid),
    OpCase("gelu_f64", F.gelu, [[(3, 4)]], (torch.float64,), grad=True),
    OpCase("gelu_large", F.gelu, [[(64,)]], (torch.float32,), low=-10, high=10, grad=True),
    OpCase("softplus_large", F.softplus, [[(64,)]], (torch.float32,), low=-30, high=30, grad=True),
]


@parametrize(CASES)
def test_activation(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_gelu_bad_approximate_raises():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            F.gelu(torch.ones(3, device=dev), approximate="bogus")


def test_relu_bool_raises():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.relu(torch.ones(3, dtype=torch.bool, device=dev))


def test_backward_ops_direct():
    """The backward ops called directly, with the flag combinations autograd uses."""
    g = torch.randn(3, 4)
    x = torch.randn(3, 4)
    y = torch.sigmoid(x)
    aten = torch.ops.aten
    calls = [
        lambda g, x, y: aten.threshold_backward(g, x, 0.0),
        lambda g, x, y: aten.sigmoid_backward(g, y),
        lambda g, x, y: aten.tanh_backward(g, y),
        lambda g, x, y: aten.gelu_backward(g, x),
        lambda g, x, y: aten.gelu_backward(g, x, approximate="tanh"),
        lambda g, x, y: aten.hardtanh_backward(g, x, -1.0, 1.0),
        lambda g, x, y: aten.leaky_relu_backward(g, x, 0.1, False),
        lambda g, x, y: aten.elu_backward(g, 1.0, 1.0, 1.0, False, x),
        lambda g, x, y: aten.elu_backward(g, 1.0, 1.0, 1.0, True, F.elu(x)),
        lambda g, x, y: aten.softplus_backward(g, x, 1.0, 20.0),
        lambda g, x, y: aten.hardswish_backward(g, x),
        lambda g, x, y: aten.hardsigmoid_backward(g, x),
    ]
    for f in calls:
        expected = f(g, x, y)
        actual = f(g.to("tpu"), x.to("tpu"), y.to("tpu"))
        torch.testing.assert_close(actual.cpu(), expected)
