"""add, sub, mul, div (all rounding modes), floor_divide; with scalars,
broadcasting, 0-d and empty inputs."""
import torch

from optest import ALL, FLOAT, FLOATS, INTS, NUMERIC, OpCase, parametrize, run_case

BINARY_SHAPES = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1)], [(), (5,)], [(0, 3), (3,)], [(), ()]]


def nonzero(shape, dtype, i):
    t = torch.rand(shape, generator=torch.Generator().manual_seed(i)) * 4 + 0.5
    t = t * torch.where(torch.rand(shape, generator=torch.Generator().manual_seed(i + 1)) > 0.5, 1, -1)
    return t.to(dtype) if dtype.is_floating_point else (t * 2).round().clamp(min=1).to(dtype)


CASES = [
    OpCase("add", torch.add, BINARY_SHAPES, NUMERIC, inplace=lambda a, b: a.add_(b), out=torch.add, grad=True),
    OpCase("add_alpha", lambda a, b: torch.add(a, b, alpha=2), BINARY_SHAPES[:3], FLOATS + INTS),
    OpCase("add_scalar", lambda a: a + 2.5, [[(3, 4)], [()]], FLOATS, inplace=lambda a: a.add_(2.5)),
    OpCase("add_int_scalar", lambda a: a + 3, [[(3, 4)]], NUMERIC),
    OpCase("int_plus_float_scalar", lambda a: a + 1.5, [[(3, 4)]], INTS),
    OpCase("bool_add", torch.add, [[(3, 4), (3, 4)]], (torch.bool,)),
    OpCase("sub", torch.sub, BINARY_SHAPES, FLOATS + INTS, inplace=lambda a, b: a.sub_(b), grad=True),
    OpCase("rsub", lambda a: 1 - a, [[(3, 4)]], FLOATS + INTS),
    OpCase("mul", torch.mul, BINARY_SHAPES, ALL, inplace=lambda a, b: a.mul_(b), out=torch.mul, grad=True),
    OpCase("mul_scalar", lambda a: a * 0.5, [[(3, 4)], [(0,)]], FLOATS + INTS),
    OpCase("div", torch.div, BINARY_SHAPES[:4], FLOATS, make=nonzero, inplace=lambda a, b: a.div_(b), grad=True),
    OpCase("int_true_div", torch.div, [[(3, 4), (3, 4)]], INTS, make=nonzero),
    OpCase("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), BINARY_SHAPES[:3],
           FLOATS + INTS, make=nonzero),
    OpCase("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), BINARY_SHAPES[:3],
           FLOATS + INTS, make=nonzero),
    OpCase("floor_divide", torch.floor_divide, [[(3, 4), (3, 4)]], FLOATS + INTS, make=nonzero),
    OpCase("mixed_dtypes", lambda a, b: a.float() * b.to(torch.bfloat16) + a, [[(3, 4), (3, 4)]], INTS),
    OpCase("zero_dim_tpu_promotes_like_cpu", lambda a, b: a.to(torch.float16) + b.double().sum(),
           [[(3,), (2,)]], FLOAT),
]


@parametrize(CASES)
def test_arithmetic(case, shapes, dtype):
    run_case(case, shapes, dtype)
