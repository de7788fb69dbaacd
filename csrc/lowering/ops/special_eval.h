// Evaluation helpers shared by the special-function rules
// (special_polynomials.cpp, special_bessel.cpp, special_gamma.cpp,
// special_erf.cpp) and elementwise_math.cpp: constants shaped like a value,
// Horner and Clenshaw (Cephes `chbevl`) sums over coefficient lists, 1-D
// constant tables, the dtype a rule computes in, and the one-tensor /
// two-operand float rule shapes.
//
// PyTorch's CPU kernels evaluate these functions in the tensor's scalar type
// (float for float32) with the coefficients rounded to that type; the helpers
// do the same so that results agree to a few ulps.
#pragma once

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "lowering/helpers.h"

namespace tt::lowering::special {

using hlo::Cmp;
using hlo::is_float;

inline Value cst(Builder& b, Value like, double v) { return full_like(b, like, v); }
inline Value lt(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::LT); }
inline Value le(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::LE); }
inline Value gt(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::GT); }
inline Value ge(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::GE); }
inline Value eq(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::EQ); }
inline Value ne(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::NE); }
inline Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }
inline Value is_inf(Builder& b, Value x) {
  return b.compare(b.abs(x), cst(b, x, std::numeric_limits<double>::infinity()), Cmp::EQ);
}
inline Value sel(Builder& b, Value pred, double v, Value otherwise) {
  return b.select(pred, cst(b, otherwise, v), otherwise);
}

// c[0] y^n + c[1] y^(n-1) + ... + c[n], in Horner form (Cephes `polevl`).
inline Value horner(Builder& b, Value y, const std::vector<double>& c) {
  Value r = cst(b, y, c[0]);
  for (size_t i = 1; i < c.size(); ++i) r = b.add(b.mul(r, y), cst(b, y, c[i]));
  return r;
}

// Sum of a Chebyshev series by Clenshaw's recurrence, Cephes `chbevl`:
// b0 = y b1 - b2 + c[i]; the result is (b0 - b2) / 2.
inline Value chbevl(Builder& b, Value y, const std::vector<double>& c) {
  Value b0 = cst(b, y, c[0]), b1 = cst(b, y, 0), b2 = b1;
  for (size_t i = 1; i < c.size(); ++i) {
    b2 = b1;
    b1 = b0;
    b0 = b.add(b.sub(b.mul(y, b1), b2), cst(b, y, c[i]));
  }
  return b.mul(cst(b, y, 0.5), b.sub(b0, b2));
}

// Any element of a predicate true (a 0-d i1).
inline Value any(Builder& b, Value pred) {
  if (pred.rank() == 0) return pred;
  std::vector<int64_t> dims(pred.rank());
  for (int64_t i = 0; i < pred.rank(); ++i) dims[i] = i;
  return b.reduce(pred, b.constant_int(0, DType::Pred), dims, "stablehlo.or");
}

// A 1-D constant tensor.
inline Value table(Builder& b, const std::vector<double>& v, DType t) {
  std::string lit = "dense<[";
  char buf[40];
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F64) std::snprintf(buf, sizeof buf, "%.17e", v[i]);
    else std::snprintf(buf, sizeof buf, "%.9e", static_cast<double>(static_cast<float>(v[i])));
    lit += (i ? ", " : "") + std::string(buf);
  }
  Type tt{t, {static_cast<int64_t>(v.size())}};
  return b.emit1("stablehlo.constant", {}, tt, "value = " + lit + "]> : " + tt.str());
}

using Fn1 = std::function<Value(Builder&, Value)>;
using Fn2 = std::function<Value(Builder&, Value, Value)>;

// One tensor in, a float result (ints compute in the result's float type).
inline Values float1(Builder& b, const Args& a, const Context& c, const Fn1& f, DType compute = DType::Pred) {
  const Type& out = c.out();
  if (!is_float(out.dtype)) throw LoweringError(c.op + ": unsupported result type " + hlo::mlir_name(out.dtype));
  DType ct = compute == DType::Pred ? compute_dtype(out.dtype) : compute;
  return {b.convert(f(b, cast_to(b, a[0].value(), ct, out.shape)), out.dtype)};
}

// Two operands promoted to the result type, computed in f32 for f16/bf16.
inline Values binary(Builder& b, const Args& a, const Context& c, const Fn2& f, bool needs_float = true) {
  const Type& out = c.out();
  if (needs_float && !is_float(out.dtype)) throw LoweringError(c.op + ": non-float result");
  return {elementwise(b, {&a[0], &a[1]}, out, [&](Builder& b, const Values& x) { return f(b, x[0], x[1]); },
                      compute_dtype(out.dtype))};
}

// The sign bit of x (set for -0.0 too), read from its bits.
inline Value sign_bit(Builder& b, Value x) {
  DType it = x.dtype() == DType::F64 ? DType::S64 : DType::S32;
  Value bits = b.bitcast_convert(x.dtype() == DType::F64 ? x : b.convert(x, DType::F32), it);
  return b.compare(bits, b.constant_int(0, it, x.shape()), Cmp::LT);
}

}  // namespace tt::lowering::special
