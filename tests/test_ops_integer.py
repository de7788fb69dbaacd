"""Integer ops: gcd, lcm, the bit shifts (bitwise_left/right_shift, << and >>
with tensors and scalars), torch.equal, tril_indices/triu_indices."""
import pytest
import torch

from optest import FLOATS, INTS, OpCase, parametrize, run_case, same_error

INTEGERS = INTS + (torch.uint8, torch.int8, torch.int16)
BINARY_SHAPES = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1)], [(), (5,)], [(0, 3), (3,)]]


def signed_values(shape, dtype, i):
    """Values with zeros, signs and common factors (uint8: non-negative)."""
    g = torch.Generator().manual_seed(i + 11)
    lo = 0 if dtype == torch.uint8 else -60
    t = torch.randint(lo, 61, shape, generator=g)
    if t.numel():
        t.view(-1)[:: max(1, t.numel() // 3)] = 0
    return t.to(dtype)


def shift_amounts(shape, dtype, i):
    """Input 0: values; input 1: shift amounts, some negative or past the
    bit width (PyTorch defines those: 0, or the sign fill to the right)."""
    g = torch.Generator().manual_seed(i + 3)
    if i == 0:
        lo = 0 if dtype == torch.uint8 else -100
        return torch.randint(lo, 101, shape, generator=g).to(dtype)
    bits = torch.iinfo(dtype).bits
    lo = 0 if dtype == torch.uint8 else -2
    return torch.randint(lo, bits + 3, shape, generator=g).to(dtype)


# torch.equal returns a Python bool: Dynamo breaks the graph at it, so a row
# that calls nothing else hands no graph to the backend.
EQUAL_ALONE = {"compile": "torch.equal alone: a Python bool, so Dynamo hands over no graph"}
CASES = [
    OpCase("gcd", torch.gcd, BINARY_SHAPES, INTEGERS, make=signed_values, inplace=lambda a, b: a.gcd_(b),
           out=torch.gcd),
    OpCase("gcd_int_min", torch.gcd, [[(4,), (4,)]], (torch.int8,),
           make=lambda s, d, i: torch.tensor([-128, -128, 0, 6], dtype=d) if i == 0
           else torch.tensor([0, 64, 0, -4], dtype=d)),
    OpCase("lcm", torch.lcm, BINARY_SHAPES, INTEGERS, make=signed_values, inplace=lambda a, b: a.lcm_(b),
           out=torch.lcm),
    OpCase("left_shift", torch.bitwise_left_shift, BINARY_SHAPES, INTEGERS, make=shift_amounts,
           inplace=lambda a, b: a.bitwise_left_shift_(b), out=torch.bitwise_left_shift),
    OpCase("right_shift", torch.bitwise_right_shift, BINARY_SHAPES, INTEGERS, make=shift_amounts,
           inplace=lambda a, b: a.bitwise_right_shift_(b), out=torch.bitwise_right_shift),
    OpCase("lshift_operator", lambda a, b: a << b, BINARY_SHAPES[:3], INTEGERS, make=shift_amounts),
    OpCase("rshift_operator", lambda a, b: a >> b, BINARY_SHAPES[:3], INTEGERS, make=shift_amounts),
    OpCase("lshift_scalar", lambda a: a << 3, [[(3, 4)], [()], [(0, 2)]], INTEGERS, make=shift_amounts),
    OpCase("rshift_scalar", lambda a: a >> 2, [[(3, 4)], [()], [(0, 2)]], INTEGERS, make=shift_amounts),
    OpCase("rshift_scalar_past_width", lambda a: a >> 70, [[(3, 4)]], INTEGERS, make=shift_amounts),
    OpCase("lshift_inplace_operator", lambda a: a.clone().__ilshift__(2), [[(3, 4)]], INTEGERS, make=shift_amounts),
    OpCase("rshift_inplace_operator", lambda a: a.clone().__irshift__(1), [[(3, 4)]], INTEGERS, make=shift_amounts),
    OpCase("left_shift_tensor_scalar", lambda a: torch.bitwise_left_shift(a, 5), [[(3, 4)]], INTEGERS,
           make=shift_amounts, inplace=lambda a: a.bitwise_left_shift_(5)),
    OpCase("right_shift_scalar_tensor", lambda a, b: torch.bitwise_right_shift(64, b), [[(3, 4), (3, 4)]], INTS,
           make=shift_amounts),
    OpCase("equal_same", lambda a: torch.equal(a, a.clone()), [[(3, 4)], [()], [(0, 3)]],
           FLOATS + INTS + (torch.bool,)),
    OpCase("equal_differs", lambda a, b: torch.equal(a, b), [[(3, 4), (3, 4)]], FLOATS + INTS,
           skip_modes=EQUAL_ALONE),
    OpCase("equal_other_size", lambda a, b: torch.equal(a, b), [[(3, 4), (4, 3)], [(3, 4), (4,)], [(0,), (0, 1)]],
           FLOATS, skip_modes=EQUAL_ALONE),
    OpCase("equal_promotes", lambda a: torch.equal(a, a.to(torch.int64)), [[(3, 4)]], (torch.float32, torch.int32),
           make=signed_values),
    OpCase("equal_nan", lambda a: torch.equal(a, a), [[(4,)]], (torch.float32,),
           make=lambda s, d, i: torch.tensor([1.0, float("nan"), 2.0, 3.0], dtype=d), skip_modes=EQUAL_ALONE),
]


@parametrize(CASES)
def test_integer_op(case, shapes, dtype):
    run_case(case, shapes, dtype)


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
@pytest.mark.parametrize("args", [(4, 3), (3, 5, 1), (5, 5, -2), (4, 4, 10), (4, 4, -10), (0, 3), (3, 0, 1)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_triangle_indices(fn, args, dtype):
    expected = fn(*args, dtype=dtype)
    actual = fn(*args, dtype=dtype, device="tpu")
    assert actual.device.type == "tpu" and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected)


def test_integer_ops_errors_like_cpu():
    a, b = torch.randn(3), torch.randn(3)
    same_error(torch.gcd, a, b)
    same_error(torch.bitwise_left_shift, a, b)
    # The CPU raises NotImplementedError, PyTorch's meta kernel (used on
    # tpu) RuntimeError, its base class.
    for x in (a, a.to("tpu")):
        with pytest.raises(RuntimeError):
            x >> 1
    same_error(torch.gcd, torch.ones(3, dtype=torch.int64), torch.ones(4, dtype=torch.int64))
    same_error(torch.lcm, torch.ones(3, dtype=torch.int64), torch.ones(4, dtype=torch.int64))
    for fn in (torch.tril_indices, torch.triu_indices):
        with pytest.raises(RuntimeError):
            fn(-1, 3)
        with pytest.raises(RuntimeError):
            fn(-1, 3, device="tpu")
    with pytest.raises(RuntimeError):
        torch.equal(torch.ones(3, device="tpu"), torch.ones(3))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_integer_ops_in_both_eager_modes(mode):
    import torch_tpu

    x = torch.tensor([12, -18, 7, 0], dtype=torch.int64)
    y = torch.tensor([8, 27, 3, 5], dtype=torch.int64)
    with torch_tpu.eager_mode(mode):
        g = torch.gcd(x.to("tpu"), y.to("tpu"))
        l = torch.lcm(x.to("tpu"), y.to("tpu"))
        s = (x.to("tpu") << 3) >> torch.tensor(1).to("tpu")
        same = torch.equal(g, g)
    assert same is True
    torch.testing.assert_close(g.cpu(), torch.gcd(x, y))
    torch.testing.assert_close(l.cpu(), torch.lcm(x, y))
    torch.testing.assert_close(s.cpu(), (x << 3) >> 1)
