// Comparisons (eq, ne, lt, le, gt, ge), logical_and/or/xor/not, bitwise
// and/or/xor/not, where.self, masked_fill, and the float-class predicates
// isnan, isinf, isposinf, isneginf.
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

// x != 0 as a bool value (no-op for bool).
Value truthy(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  return b.compare(x, full_like(b, x, 0), Cmp::NE);
}

// Both sides promoted to their common type (PyTorch compares in it), then
// compared; the result is bool.
Values compare_rule(Builder& b, const Args& a, const Context& c, Cmp dir) {
  DType common = promote({&a[0], &a[1]});
  const Shape& shape = c.out().shape;
  Value x = cast_to(b, a[0].value(), common, shape);
  Value y = cast_to(b, a[1].value(), common, shape);
  return {b.compare(x, y, dir)};
}

TT_RULE({"aten::eq.Tensor", "aten::eq.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return compare_rule(b, a, c, Cmp::EQ); });
TT_RULE({"aten::ne.Tensor", "aten::ne.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return compare_rule(b, a, c, Cmp::NE); });
TT_RULE({"aten::lt.Tensor", "aten::lt.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return compare_rule(b, a, c, Cmp::LT); });
TT_RULE({"aten::le.Tensor", "aten::le.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return compare_rule(b, a, c, Cmp::LE); });
TT_RULE({"aten::gt.Tensor", "aten::gt.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return compare_rule(b, a, c, Cmp::GT); });
TT_RULE({"aten::ge.Tensor", "aten::ge.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return compare_rule(b, a, c, Cmp::GE); });

// logical_*: each operand is truthy-converted; the result takes out's type
// (bool for the functional form).
Values logical_rule(Builder& b, const Args& a, const Context& c, const char* op) {
  const Shape& shape = c.out().shape;
  Value x = b.broadcast_to(truthy(b, a[0].value()), shape);
  Value y = b.broadcast_to(truthy(b, a[1].value()), shape);
  return {b.convert(b.binary(op, x, y), c.out().dtype)};
}

TT_RULE({"aten::logical_and"}, [](Builder& b, const Args& a, const Context& c) {
  return logical_rule(b, a, c, "stablehlo.and");
});
TT_RULE({"aten::logical_or"}, [](Builder& b, const Args& a, const Context& c) {
  return logical_rule(b, a, c, "stablehlo.or");
});
TT_RULE({"aten::logical_xor"}, [](Builder& b, const Args& a, const Context& c) {
  return logical_rule(b, a, c, "stablehlo.xor");
});
TT_RULE({"aten::logical_not"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = b.broadcast_to(truthy(b, a[0].value()), c.out().shape);
  return Values{b.convert(b.not_(x), c.out().dtype)};
});

// bitwise_*: integer and bool types only (floats fall back, where the CPU
// raises PyTorch's own error).
Values bitwise_rule(Builder& b, const Args& a, const Context& c, const char* op) {
  const Type& out = c.out();
  if (is_float(out.dtype)) throw LoweringError(c.op + " is not implemented for floating-point types");
  return {elementwise(b, {&a[0], &a[1]}, out, [&](Builder& b, const Values& x) {
    return b.binary(op, x[0], x[1]);
  }, out.dtype)};
}

TT_RULE({"aten::bitwise_and.Tensor", "aten::bitwise_and.Scalar", "aten::bitwise_and.Scalar_Tensor"},
        [](Builder& b, const Args& a, const Context& c) { return bitwise_rule(b, a, c, "stablehlo.and"); });
TT_RULE({"aten::bitwise_or.Tensor", "aten::bitwise_or.Scalar", "aten::bitwise_or.Scalar_Tensor"},
        [](Builder& b, const Args& a, const Context& c) { return bitwise_rule(b, a, c, "stablehlo.or"); });
TT_RULE({"aten::bitwise_xor.Tensor", "aten::bitwise_xor.Scalar", "aten::bitwise_xor.Scalar_Tensor"},
        [](Builder& b, const Args& a, const Context& c) { return bitwise_rule(b, a, c, "stablehlo.xor"); });
TT_RULE({"aten::bitwise_not"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  if (is_float(out.dtype)) throw LoweringError("bitwise_not is not implemented for floating-point types");
  return Values{b.not_(cast_to(b, a[0].value(), out.dtype, out.shape))};
});

// where(cond, self, other): self and other promoted to out's type.
TT_RULE({"aten::where.self"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value cond = b.broadcast_to(truthy(b, a[0].value()), out.shape);
  Value x = cast_to(b, a[1].value(), out.dtype, out.shape);
  Value y = cast_to(b, a[2].value(), out.dtype, out.shape);
  return Values{b.select(cond, x, y)};
});
TT_PADDING({"aten::where.self"}, Padding::elementwise());

// masked_fill(self, mask, value): value cast to self's type (.Scalar: a
// runtime scalar; .Tensor: a 0-d tensor).
TT_RULE({"aten::masked_fill.Scalar", "aten::masked_fill.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = cast_to(b, a[0].value(), out.dtype, out.shape);
  Value mask = b.broadcast_to(truthy(b, a[1].value()), out.shape);
  Value v = a[2].value();
  if (v.rank() != 0) throw LoweringError("masked_fill only supports a 0-dimensional value tensor");
  return Values{b.select(mask, cast_to(b, v, out.dtype, out.shape), x)};
});
TT_PADDING({"aten::masked_fill.Scalar", "aten::masked_fill.Tensor"}, Padding::elementwise());

// Float-class predicates: always false for integer and bool tensors.
Values float_class(Builder& b, const Args& a, const Context& c,
                   const std::function<Value(Builder&, Value)>& f) {
  Value x = a[0].value();
  if (!is_float(x.dtype())) return {b.constant_int(0, DType::Pred, c.out().shape)};
  return {f(b, x)};
}

Value inf_like(Builder& b, Value x, bool negative) {
  double inf = std::numeric_limits<double>::infinity();
  return full_like(b, x, negative ? -inf : inf);
}

TT_RULE({"aten::isnan"}, [](Builder& b, const Args& a, const Context& c) {
  Value z = a[0].value();
  if (hlo::is_complex(z.dtype()))  // either part NaN
    return Values{b.or_(b.compare(b.real(z), b.real(z), Cmp::NE), b.compare(b.imag(z), b.imag(z), Cmp::NE))};
  return float_class(b, a, c, [](Builder& b, Value x) { return b.compare(x, x, Cmp::NE); });
});
TT_RULE({"aten::isinf"}, [](Builder& b, const Args& a, const Context& c) {
  Value z = a[0].value();
  if (hlo::is_complex(z.dtype())) {  // either part infinite
    Value re = b.abs(b.real(z)), im = b.abs(b.imag(z)), inf = inf_like(b, re, false);
    return Values{b.or_(b.compare(re, inf, Cmp::EQ), b.compare(im, inf, Cmp::EQ))};
  }
  return float_class(b, a, c, [](Builder& b, Value x) { return b.compare(b.abs(x), inf_like(b, x, false), Cmp::EQ); });
});
TT_RULE({"aten::isposinf"}, [](Builder& b, const Args& a, const Context& c) {
  return float_class(b, a, c, [](Builder& b, Value x) { return b.compare(x, inf_like(b, x, false), Cmp::EQ); });
});
TT_RULE({"aten::isneginf"}, [](Builder& b, const Args& a, const Context& c) {
  return float_class(b, a, c, [](Builder& b, Value x) { return b.compare(x, inf_like(b, x, true), Cmp::EQ); });
});

}  // namespace
}  // namespace tt::lowering
