"""Comparisons (eq, ne, lt, le, gt, ge with tensors and scalars), logical and
bitwise ops, where, masked_fill, isnan/isinf/isfinite/isposinf/isneginf."""
import pytest
import torch

from optest import ALL, FLOATS, INTS, NUMERIC, OpCase, make_tensor, parametrize, run_case

BINARY_SHAPES = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1)], [(), (5,)], [(0, 3), (3,)], [(), ()]]
UNARY_SHAPES = [[(3, 4)], [(2, 3, 5)], [()], [(0, 3)]]
BITS = INTS + (torch.uint8, torch.int8, torch.int16, torch.bool)


def special(shape, dtype, i):
    g = torch.Generator().manual_seed(i)
    t = torch.randint(-2, 3, shape, generator=g).to(dtype)
    if dtype.is_floating_point and t.numel():
        flat = t.view(-1)
        vals = [float("nan"), float("inf"), -float("inf"), -0.0, 0.5]
        for k, v in enumerate(vals[: flat.numel()]):
            flat[(k * 3 + i) % flat.numel()] = v
    return t


def cond_first(shape, dtype, i):
    """Input 0 is a bool condition/mask, the others ordinary values."""
    g = torch.Generator().manual_seed(i)
    if i == 0:
        return torch.rand(shape, generator=g) > 0.5
    return make_tensor(shape, dtype, -3, 3, seed=i)


def mask_second(shape, dtype, i):
    if i == 1:
        return torch.rand(shape, generator=torch.Generator().manual_seed(i)) > 0.5
    return make_tensor(shape, dtype, -3, 3, seed=i)


def small_ints(shape, dtype, i):
    """Few distinct values so that equality is hit often."""
    return torch.randint(-2, 3, shape, generator=torch.Generator().manual_seed(i)).to(dtype) \
        if dtype != torch.bool else torch.rand(shape, generator=torch.Generator().manual_seed(i)) > 0.5


def cmp_cases(name, fn, method):
    return [
        OpCase(name, fn, BINARY_SHAPES, NUMERIC + (torch.bool,), make=small_ints,
               inplace=lambda a, b: getattr(a, method + "_")(b), out=fn),
        OpCase(name + "_special", fn, [[(12,), (12,)]], FLOATS, make=special),
        OpCase(name + "_scalar", lambda a: fn(a, 1), UNARY_SHAPES, NUMERIC, make=small_ints,
               inplace=lambda a: getattr(a, method + "_")(1)),
        OpCase(name + "_float_scalar", lambda a: fn(a, 0.5), UNARY_SHAPES[:1], FLOATS + INTS, make=small_ints),
        OpCase(name + "_bool_scalar", lambda a: fn(a, True), UNARY_SHAPES[:1], (torch.bool, torch.int32),
               make=small_ints),
        OpCase(name + "_mixed", lambda a, b: fn(a, b.to(torch.float16)), [[(3, 4), (3, 4)]], INTS, make=small_ints),
        OpCase(name + "_zero_dim", lambda a, b: fn(a, b.sum().to(torch.float64)), [[(3, 4), (2,)]],
               (torch.float32, torch.int32), make=small_ints),
    ]


CASES = (
    cmp_cases("eq", torch.eq, "eq") + cmp_cases("ne", torch.ne, "ne") + cmp_cases("lt", torch.lt, "lt")
    + cmp_cases("le", torch.le, "le") + cmp_cases("gt", torch.gt, "gt") + cmp_cases("ge", torch.ge, "ge")
    + [
        OpCase("eq_operator", lambda a, b: a == b, BINARY_SHAPES[:2], FLOATS, make=small_ints),
        OpCase("logical_and", torch.logical_and, BINARY_SHAPES, ALL, make=small_ints,
               inplace=lambda a, b: a.logical_and_(b), out=torch.logical_and),
        OpCase("logical_or", torch.logical_or, BINARY_SHAPES, ALL, make=small_ints,
               inplace=lambda a, b: a.logical_or_(b)),
        OpCase("logical_xor", torch.logical_xor, BINARY_SHAPES, ALL, make=small_ints,
               inplace=lambda a, b: a.logical_xor_(b)),
        OpCase("logical_not", torch.logical_not, UNARY_SHAPES, ALL, make=small_ints,
               inplace=lambda a: a.logical_not_(), out=torch.logical_not),
        OpCase("logical_and_nan", torch.logical_and, [[(12,), (12,)]], FLOATS, make=special),
        OpCase("bitwise_and", torch.bitwise_and, BINARY_SHAPES, BITS, low=-100, high=100,
               inplace=lambda a, b: a.bitwise_and_(b), out=torch.bitwise_and),
        OpCase("bitwise_or", torch.bitwise_or, BINARY_SHAPES, BITS, low=-100, high=100,
               inplace=lambda a, b: a.bitwise_or_(b)),
        OpCase("bitwise_xor", torch.bitwise_xor, BINARY_SHAPES, BITS, low=-100, high=100,
               inplace=lambda a, b: a.bitwise_xor_(b)),
        OpCase("bitwise_and_scalar", lambda a: a & 6, UNARY_SHAPES, INTS + (torch.uint8,), low=0, high=100,
               inplace=lambda a: a.bitwise_and_(6)),
        OpCase("bitwise_or_scalar", lambda a: a | 5, UNARY_SHAPES[:1], INTS + (torch.bool,), low=0, high=100),
        OpCase("bitwise_xor_scalar", lambda a: a ^ 3, UNARY_SHAPES[:1], INTS, low=-100, high=100),
        OpCase("bitwise_bool_scalar", lambda a: a & True, UNARY_SHAPES[:1], (torch.bool,)),
        OpCase("bitwise_scalar_tensor", lambda a: torch.bitwise_and(7, a), UNARY_SHAPES[:1], INTS, low=0, high=100),
        OpCase("bitwise_not", torch.bitwise_not, UNARY_SHAPES, BITS, low=-100, high=100,
               inplace=lambda a: a.bitwise_not_(), out=torch.bitwise_not),
        OpCase("invert_operator", lambda a: ~a, UNARY_SHAPES[:1], (torch.bool, torch.int64)),
        OpCase("where", torch.where,
               [[(3, 4), (3, 4), (3, 4)], [(3, 4), (4,), (3, 1)], [(), (2, 3), ()], [(0, 3), (3,), (1,)]],
               ALL, make=cond_first, out=torch.where),
        OpCase("where_grad", torch.where, [[(3, 4), (3, 4), (3, 4)], [(), (), ()]], FLOATS, make=cond_first,
               grad=True),
        OpCase("where_float_cond", lambda c, a, b: torch.where(c > 0, a, b), [[(3, 4), (3, 4), (3, 4)]], FLOATS),
        OpCase("where_mixed_dtypes", lambda c, a, b: torch.where(c > 0, a, b.to(torch.float16)),
               [[(3, 4), (3, 4), (3, 4)]], INTS + (torch.float32,)),
        OpCase("where_scalar_other", lambda c, a: torch.where(c > 0, a, 0.5), [[(3, 4), (3, 4)]], FLOATS + INTS),
        OpCase("where_scalar_self", lambda c, a: torch.where(c > 0, 2, a), [[(3, 4), (3, 4)]], FLOATS + INTS),
        OpCase("where_scalars", lambda c: torch.where(c > 0, 1.0, 0.0), [[(3, 4)], [()]], FLOATS),
        OpCase("masked_fill", lambda a, m: a.masked_fill(m, -2.5), [[(3, 4), (3, 4)], [(3, 4), (4,)],
               [(), ()], [(0, 3), (3,)]], FLOATS, make=mask_second, inplace=lambda a, m: a.masked_fill_(m, -2.5),
               grad=True),
        OpCase("masked_fill_int", lambda a, m: a.masked_fill(m > 0, 7), [[(3, 4), (3, 4)]], INTS + (torch.bool,),
               inplace=lambda a, m: a.masked_fill_(m > 0, 7)),
        OpCase("masked_fill_inf", lambda a, m: a.masked_fill(m > 0, float("-inf")), [[(3, 4), (3, 1)]], FLOATS),
        OpCase("masked_fill_tensor", lambda a, m, v: a.masked_fill(m > 0, v), [[(3, 4), (3, 4), ()]], FLOATS,
               inplace=lambda a, m, v: a.masked_fill_(m > 0, v)),
        OpCase("masked_fill_broadcast_self", lambda a, m: a.masked_fill(m > 0, 1.0), [[(4,), (3, 4)]], FLOATS),
        OpCase("isnan", torch.isnan, [[(12,)], [(3, 4)], [()], [(0, 3)]], FLOATS, make=special),
        OpCase("isinf", torch.isinf, [[(12,)], [(3, 4)]], FLOATS, make=special),
        OpCase("isfinite", torch.isfinite, [[(12,)], [(3, 4)]], FLOATS, make=special),
        OpCase("isposinf", torch.isposinf, [[(12,)]], FLOATS, make=special, out=torch.isposinf),
        OpCase("isneginf", torch.isneginf, [[(12,)]], FLOATS, make=special),
        OpCase("isnan_int", torch.isnan, [[(3, 4)]], INTS + (torch.bool,)),
        OpCase("isinf_int", torch.isinf, [[(3, 4)]], INTS + (torch.bool,)),
        OpCase("isfinite_int", torch.isfinite, [[(3, 4)]], INTS),
    ]
)


@parametrize(CASES)
def test_comparison(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_compare_shape_mismatch_raises():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.ones(2, 3, device=dev) < torch.ones(4, device=dev)


def test_inplace_compare_broadcast_raises():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.ones(3, device=dev).eq_(torch.ones(2, 3, device=dev))


def test_where_needs_bool_condition():
    for dev in ("cpu", "tpu"):
        a = torch.ones(3, device=dev)
        with pytest.raises(RuntimeError, match="bool"):
            torch.where(a, a, a)


def test_masked_fill_needs_bool_mask():
    for dev in ("cpu", "tpu"):
        a = torch.ones(3, device=dev)
        with pytest.raises(RuntimeError, match="bool"):
            a.masked_fill(a, 1.0)


def test_masked_fill_value_must_be_0d():
    for dev in ("cpu", "tpu"):
        a = torch.ones(3, device=dev)
        with pytest.raises(RuntimeError):
            a.masked_fill(a > 0, torch.ones(3, device=dev))


def test_bitwise_float_raises(allow_fallback):
    for dev in ("cpu", "tpu"):
        a = torch.ones(3, device=dev)
        with pytest.raises(RuntimeError):
            torch.bitwise_and(a, a)
