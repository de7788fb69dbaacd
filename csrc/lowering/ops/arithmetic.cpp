// add, sub, mul, div (with rounding modes): PyTorch's promotion and
// broadcasting come from elementwise(); the result type from the context.
#include "lowering/device_check.h"
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// Half-precision results compute in f32 and round once, as PyTorch's CPU
// kernels do (a Python scalar then keeps its f32 value).

// self + alpha * other (alpha is a runtime Scalar; absent for mul/div).
Value scaled(Builder& b, Value other, const Arg& alpha) {
  if (alpha.is_none()) return other;
  return b.mul(other, cast_to(b, alpha.value(), other.dtype(), other.shape()));
}

Values add_like(Builder& b, const Args& a, const Context& c, bool subtract) {
  DType t = compute_dtype(c.out().dtype);
  return {elementwise(b, {&a[0], &a[1]}, c.out(), [&](Builder& b, const Values& x) {
    Value rhs = a.size() > 2 ? scaled(b, x[1], a[2]) : x[1];
    return subtract ? b.sub(x[0], rhs) : b.add(x[0], rhs);
  }, t)};
}

TT_RULE({"aten::add.Tensor", "aten::add.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return add_like(b, a, c, false); });
TT_RULE({"aten::sub.Tensor", "aten::sub.Scalar", "aten::rsub.Tensor", "aten::rsub.Scalar"},
        [](Builder& b, const Args& a, const Context& c) {
          if (c.op.rfind("aten::rsub", 0) == 0) {
            Args swapped = a;
            std::swap(swapped[0], swapped[1]);
            return add_like(b, swapped, c, true);
          }
          return add_like(b, a, c, true);
        });

TT_RULE({"aten::mul.Tensor", "aten::mul.Scalar"}, [](Builder& b, const Args& a, const Context& c) {
  DType t = compute_dtype(c.out().dtype);
  return Values{elementwise(b, {&a[0], &a[1]}, c.out(), [&](Builder& b, const Values& x) {
    return t == DType::Pred ? b.and_(x[0], x[1]) : b.mul(x[0], x[1]);
  }, t)};
});

// Floor of a quotient for integers: truncating division corrected when the
// signs differ and the remainder is non-zero (PyTorch's floor_divide).
Value int_floor_div(Builder& b, Value x, Value y) {
  Value q = b.div(x, y);
  if (hlo::is_unsigned(x.dtype())) return q;
  Value zero = full_like(b, x, 0);
  Value r = b.binary("stablehlo.remainder", x, y);
  Value signs_differ = b.compare(b.compare(r, zero, hlo::Cmp::LT), b.compare(y, zero, hlo::Cmp::LT),
                                 hlo::Cmp::NE);
  Value adjust = b.and_(b.compare(r, zero, hlo::Cmp::NE), signs_differ);
  return b.select(adjust, b.sub(q, full_like(b, q, 1)), q);
}

Value float_floor_div(Builder& b, Value x, Value y) {
  return b.unary("stablehlo.floor", b.div(x, y));
}

// div.Tensor / div.Scalar: true division (ints compute in float);
// div.Tensor_mode / div.Scalar_mode: rounding_mode "trunc" or "floor". An
// integer divisor of 0 raises the CPU's ZeroDivisionError (a device check).
Values div_rule(Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  std::string mode = a.size() > 2 && a[2].kind == Arg::Kind::String ? a[2].s : "";
  DType compute = mode.empty() ? compute_dtype(out.dtype) : compute_dtype(promote({&a[0], &a[1]}));
  if (mode.empty()) {
    return {elementwise(b, {&a[0], &a[1]}, out, [](Builder& b, const Values& x) {
      return b.div(x[0], x[1]);
    }, compute)};
  }
  return {elementwise(b, {&a[0], &a[1]}, out, [&](Builder& b, const Values& x) {
    bool fl = hlo::is_float(compute);
    check_nonzero_divisor(b, c, x[1]);
    if (mode == "trunc") {
      if (!fl) return b.div(x[0], x[1]);
      Value q = b.div(x[0], x[1]);
      return b.mul(b.unary("stablehlo.sign", q), b.unary("stablehlo.floor", b.abs(q)));
    }
    if (mode != "floor")
      throw LoweringError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '" + mode + "'");
    return fl ? float_floor_div(b, x[0], x[1]) : int_floor_div(b, x[0], x[1]);
  }, compute)};
}

TT_RULE({"aten::div.Tensor", "aten::div.Scalar", "aten::div.Tensor_mode", "aten::div.Scalar_mode"}, div_rule);

TT_RULE({"aten::floor_divide", "aten::floor_divide.Scalar"}, [](Builder& b, const Args& a, const Context& c) {
  DType t = c.out().dtype;
  return Values{elementwise(b, {&a[0], &a[1]}, c.out(), [&](Builder& b, const Values& x) {
    check_nonzero_divisor(b, c, x[1]);
    return hlo::is_float(t) ? float_floor_div(b, x[0], x[1]) : int_floor_div(b, x[0], x[1]);
  }, t)};
});

}  // namespace
}  // namespace tt::lowering
