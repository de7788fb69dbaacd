// Integer-only elementwise ops: gcd and the bit shifts (bitwise_left_shift,
// bitwise_right_shift, __lshift__, __rshift__). Floating-point and bool
// arguments are declined, as the CPU kernels decline them (PyTorch raises
// "not implemented for 'Float'" there).
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

void require_integer(DType t, const Context& c) {
  if (!hlo::is_int(t)) throw LoweringError(c.op + " is defined for integer types only");
}

Value any_nonzero(Builder& b, Value x) {
  Value nz = b.compare(x, full_like(b, x, 0), Cmp::NE);
  std::vector<int64_t> dims(x.shape().size());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  return b.reduce(nz, b.constant_int(0, DType::Pred), dims, "stablehlo.or");
}

// gcd(a, b) as PyTorch computes it: Euclid's algorithm on |a| and |b|
// (a, b = b % a, a until a is 0), every element in lockstep until all are
// done. |INT_MIN| stays negative, as in C++.
Value gcd_values(Builder& b, Value x, Value y) {
  const bool is_unsigned = hlo::is_unsigned(x.dtype());
  Values st = b.while_loop(
      {is_unsigned ? x : b.abs(x), is_unsigned ? y : b.abs(y)},
      [](Builder& bb, const Values& s) { return Values{any_nonzero(bb, s[0])}; },
      [](Builder& bb, const Values& s) {
        Value a = s[0], r = s[1];
        Value live = bb.compare(a, full_like(bb, a, 0), Cmp::NE);
        Value safe = bb.select(live, a, full_like(bb, a, 1));
        Value rem = bb.binary("stablehlo.remainder", r, safe);
        return Values{bb.select(live, rem, a), bb.select(live, a, r)};
      });
  return st[1];
}

TT_RULE({"aten::gcd"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  require_integer(out.dtype, c);
  return Values{elementwise(b, {&a[0], &a[1]}, out, [](Builder& b, const Values& x) {
    return gcd_values(b, x[0], x[1]);
  }, out.dtype)};
});

// PyTorch's shifts: a shift by a negative amount or by the bit width or more
// gives 0 to the left; to the right it gives the sign fill (a >> (bits-1))
// for signed types and 0 for unsigned ones.
Value shift_values(Builder& b, Value x, Value s, bool left) {
  DType t = x.dtype();
  const int bits = hlo::bit_width(t);
  const bool is_signed = !hlo::is_unsigned(t);
  const int64_t max_shift = left ? bits : bits - (is_signed ? 1 : 0);
  // A negative shift of an unsigned type reads as a large one: out of range.
  Value out_of_range = b.compare(s, full_like(b, s, static_cast<double>(max_shift)), Cmp::GE);
  if (is_signed) out_of_range = b.or_(out_of_range, b.compare(s, full_like(b, s, 0), Cmp::LT));
  Value safe = b.select(out_of_range, full_like(b, s, 0), s);
  if (left) return b.select(out_of_range, full_like(b, x, 0), b.binary("stablehlo.shift_left", x, safe));
  const char* op = is_signed ? "stablehlo.shift_right_arithmetic" : "stablehlo.shift_right_logical";
  Value fill = is_signed ? b.binary(op, x, full_like(b, x, static_cast<double>(bits - 1))) : full_like(b, x, 0);
  return b.select(out_of_range, fill, b.binary(op, x, safe));
}

Values shift_rule(Builder& b, const Args& a, const Context& c, bool left) {
  const Type& out = c.out();
  require_integer(out.dtype, c);
  return {elementwise(b, {&a[0], &a[1]}, out, [left](Builder& b, const Values& x) {
    return shift_values(b, x[0], x[1], left);
  }, out.dtype)};
}

TT_RULE({"aten::bitwise_left_shift.Tensor", "aten::bitwise_left_shift.Tensor_Scalar",
         "aten::bitwise_left_shift.Scalar_Tensor", "aten::__lshift__.Tensor", "aten::__lshift__.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return shift_rule(b, a, c, true); });
TT_RULE({"aten::bitwise_right_shift.Tensor", "aten::bitwise_right_shift.Tensor_Scalar",
         "aten::bitwise_right_shift.Scalar_Tensor", "aten::__rshift__.Tensor", "aten::__rshift__.Scalar"},
        [](Builder& b, const Args& a, const Context& c) { return shift_rule(b, a, c, false); });

}  // namespace
}  // namespace tt::lowering
