// Elementwise math: neg, abs, sign/sgn, exp/log families, sqrt, rsqrt,
// reciprocal, trigonometric and hyperbolic functions, erf/erfinv, rounding
// (floor, ceil, round, round.decimals, trunc, frac), nan_to_num, and the
// binary math ops pow, remainder, fmod, atan2, minimum/maximum, fmax/fmin,
// clamp (all overloads), lerp, addcmul/addcdiv, xlogy, logaddexp; logit and
// logit_backward, frexp.
// f16/bf16 compute in f32 and convert back, as PyTorch's CPU kernels do.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lowering/device_check.h"
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;
using UnaryFn = std::function<Value(Builder&, Value)>;


Value cst(Builder& b, Value like, double v) { return full_like(b, like, v); }

// The functions of this table that XLA computes for complex numbers too
// (the rest raise for a complex result, as they would on XLA).
bool complex_unary(const std::string& op) {
  static const std::vector<std::string> ops = {
      "aten::exp", "aten::expm1", "aten::log", "aten::log2", "aten::log10", "aten::log1p", "aten::sqrt",
      "aten::rsqrt", "aten::reciprocal", "aten::sin", "aten::cos", "aten::tan", "aten::tanh",
      "aten::sigmoid", "aten::sinh", "aten::cosh"};
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

// A floating-point function of one tensor: integer and bool inputs compute in
// the result's float type (PyTorch's int -> float32 promotion).
Values float_unary(Builder& b, const Args& a, const Context& c, const UnaryFn& f) {
  const Type& out = c.out();
  if (hlo::is_complex(out.dtype) && complex_unary(c.op))
    return {f(b, cast_to(b, a[0].value(), out.dtype, out.shape))};
  if (!is_float(out.dtype)) throw LoweringError(c.op + ": unsupported result type " + hlo::mlir_name(out.dtype));
  DType ct = compute_dtype(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape);
  return {b.convert(f(b, x), out.dtype)};
}

struct FloatUnary {
  const char* name;
  UnaryFn fn;
};

Value hlo_op(Builder& b, const char* op, Value x) { return b.unary(op, x); }

const std::vector<FloatUnary>& float_unaries() {
  static const std::vector<FloatUnary> table = {
      {"aten::exp", [](Builder& b, Value x) { return b.exp(x); }},
      {"aten::exp2", [](Builder& b, Value x) { return b.binary("stablehlo.power", cst(b, x, 2.0), x); }},
      {"aten::expm1", [](Builder& b, Value x) { return hlo_op(b, "stablehlo.exponential_minus_one", x); }},
      {"aten::log", [](Builder& b, Value x) { return b.log(x); }},
      {"aten::log2", [](Builder& b, Value x) { return b.mul(b.log(x), cst(b, x, 1.0 / std::log(2.0))); }},
      {"aten::log10", [](Builder& b, Value x) { return b.mul(b.log(x), cst(b, x, 1.0 / std::log(10.0))); }},
      {"aten::log1p", [](Builder& b, Value x) { return hlo_op(b, "stablehlo.log_plus_one", x); }},
      {"aten::sqrt", [](Builder& b, Value x) { return b.sqrt(x); }},
      {"aten::rsqrt", [](Builder& b, Value x) { return b.div(cst(b, x, 1.0), b.sqrt(x)); }},  // 1 / sqrt, exactly as PyTorch
      {"aten::reciprocal", [](Builder& b, Value x) { return b.div(cst(b, x, 1.0), x); }},
      {"aten::sin", [](Builder& b, Value x) { return hlo_op(b, "stablehlo.sine", x); }},
      {"aten::cos", [](Builder& b, Value x) { return hlo_op(b, "stablehlo.cosine", x); }},
      {"aten::tan", [](Builder& b, Value x) { return hlo_op(b, "chlo.tan", x); }},
      {"aten::tanh", [](Builder& b, Value x) { return b.tanh(x); }},
      {"aten::sigmoid", [](Builder& b, Value x) { return hlo_op(b, "stablehlo.logistic", x); }},
      {"aten::erf", [](Builder& b, Value x) { return hlo_op(b, "chlo.erf", x); }},
      {"aten::erfinv", [](Builder& b, Value x) { return hlo_op(b, "chlo.erf_inv", x); }},
      {"aten::sinh", [](Builder& b, Value x) { return hlo_op(b, "chlo.sinh", x); }},
      {"aten::cosh", [](Builder& b, Value x) { return hlo_op(b, "chlo.cosh", x); }},
      {"aten::asin", [](Builder& b, Value x) { return hlo_op(b, "chlo.asin", x); }},
      {"aten::acos", [](Builder& b, Value x) { return hlo_op(b, "chlo.acos", x); }},
      {"aten::atan", [](Builder& b, Value x) { return hlo_op(b, "chlo.atan", x); }},
      {"aten::asinh", [](Builder& b, Value x) { return hlo_op(b, "chlo.asinh", x); }},
      {"aten::acosh", [](Builder& b, Value x) { return hlo_op(b, "chlo.acosh", x); }},
      {"aten::atanh", [](Builder& b, Value x) { return hlo_op(b, "chlo.atanh", x); }},
  };
  return table;
}

struct RegisterFloatUnaries {
  RegisterFloatUnaries() {
    for (const auto& u : float_unaries()) {
      UnaryFn f = u.fn;
      Rule rule{[f](Builder& b, const Args& a, const Context& c) { return float_unary(b, a, c, f); }};
      rule.source = source_location(__FILE__, __LINE__);
      register_rule(u.name, std::move(rule));
    }
  }
} register_float_unaries;

// Rounds an f32 intermediate to `t` and back (no-op when `t` is the compute
// type): PyTorch's Vectorized<Half/BFloat16> rounds after every step.
Value round_through(Builder& b, Value v, DType t) {
  return t == v.dtype() ? v : b.convert(b.convert(v, t), v.dtype());
}

// logit(x, eps): log(z / (1 - z)) with z = clamp(x, eps, 1 - eps) when eps is
// given; f16/bf16 round after each step exactly as PyTorch's CPU kernel does.
TT_RULE({"aten::logit"}, [](Builder& b, const Args& a, const Context& c) {
  bool has_eps = a.size() > 1 && a[1].kind == Arg::Kind::Double;
  double eps = has_eps ? a[1].d : 0.0;
  DType t = c.out().dtype;
  return float_unary(b, a, c, [&](Builder& b, Value x) {
    Value one = cst(b, x, 1.0);
    if (has_eps) {
      Value lo = round_through(b, cst(b, x, eps), t);
      Value hi = round_through(b, b.sub(one, lo), t);
      x = b.select(b.compare(x, lo, Cmp::LT), lo, b.select(b.compare(x, hi, Cmp::GT), hi, x));
    }
    Value q = round_through(b, b.div(x, round_through(b, b.sub(one, x), t)), t);
    return b.log(q);
  });
});

// logit_backward(grad, self, eps?): grad / (x (1 - x)); with eps, 0 outside
// [eps, 1 - eps]; without, NaN outside [0, 1].
TT_RULE({"aten::logit_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value g = cast_to(b, a[0].value(), ct, out.shape), x = cast_to(b, a[1].value(), ct, out.shape);
  Value one = b.constant(1, ct, out.shape), zero = b.constant(0, ct, out.shape);
  Value r = b.div(g, b.mul(x, b.sub(one, x)));
  bool has_eps = a.size() > 2 && a[2].kind == Arg::Kind::Double;
  if (has_eps) {
    Value lo = b.constant(a[2].d, ct, out.shape), hi = b.constant(1.0 - a[2].d, ct, out.shape);
    Value outside = b.or_(b.compare(x, lo, Cmp::LT), b.compare(x, hi, Cmp::GT));
    r = b.select(outside, zero, r);
  } else {
    Value outside = b.or_(b.compare(x, zero, Cmp::LT), b.compare(x, one, Cmp::GT));
    r = b.select(outside, b.constant(std::nan(""), ct, out.shape), r);
  }
  return Values{b.convert(r, out.dtype)};
});

// ---- ops that keep integer types ---------------------------------------------------

Value int_or_float(Builder& b, const Args& a, const Context& c, const UnaryFn& f) {
  const Type& out = c.out();
  Value x = cast_to(b, a[0].value(), compute_dtype(out.dtype), out.shape);
  return b.convert(f(b, x), out.dtype);
}

TT_RULE({"aten::neg"}, [](Builder& b, const Args& a, const Context& c) {
  if (c.out().dtype == DType::Pred) throw LoweringError("neg: bool tensors are not supported");
  return Values{b.convert(b.neg(cast_to(b, a[0].value(), c.out().dtype, c.out().shape)), c.out().dtype)};
});

TT_RULE({"aten::abs"}, [](Builder& b, const Args& a, const Context& c) {
  if (hlo::is_complex(a[0].value().dtype()))  // |z|, a real result
    return Values{b.convert(b.abs(b.broadcast_to(a[0].value(), c.out().shape)), c.out().dtype)};
  Value x = cast_to(b, a[0].value(), c.out().dtype, c.out().shape);
  if (x.dtype() == DType::Pred || hlo::is_unsigned(x.dtype())) return Values{x};
  return Values{b.abs(x)};
});

// sign: (0 < x) - (x < 0); NaN gives 0 as on PyTorch's CPU. sgn of a
// complex z is z / |z|, and 0 for 0.
TT_RULE({"aten::sign", "aten::sgn"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = cast_to(b, a[0].value(), c.out().dtype, c.out().shape);
  if (hlo::is_complex(x.dtype())) {
    Value mag = b.abs(x);
    Value zero = b.constant(0, mag.dtype(), mag.shape());
    Value unit = b.div(x, b.convert(mag, x.dtype()));
    return Values{b.select(b.compare(mag, zero, Cmp::EQ), cst(b, x, 0), unit)};
  }
  if (x.dtype() == DType::Pred) return Values{x};
  Value zero = cst(b, x, 0);
  Value pos = b.select(b.compare(x, zero, Cmp::GT), cst(b, x, 1), zero);
  if (hlo::is_unsigned(x.dtype())) return Values{pos};
  return Values{b.select(b.compare(x, zero, Cmp::LT), cst(b, x, -1), pos)};
});

TT_RULE({"aten::signbit"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  if (!is_float(x.dtype())) {
    if (x.dtype() == DType::Pred || hlo::is_unsigned(x.dtype())) return Values{b.constant_int(0, DType::Pred, x.shape())};
    return Values{b.compare(x, cst(b, x, 0), Cmp::LT)};
  }
  // The sign bit itself (so -0.0 and -nan count as negative).
  DType it = x.dtype() == DType::F64 ? DType::S64 : x.dtype() == DType::F32 ? DType::S32 : DType::S16;
  Value bits = b.bitcast_convert(x, it);
  return Values{b.compare(bits, b.constant_int(0, it, x.shape()), Cmp::LT)};
});

Value trunc_float(Builder& b, Value x) {
  return b.select(b.compare(x, cst(b, x, 0), Cmp::LT), b.unary("stablehlo.ceil", x), b.unary("stablehlo.floor", x));
}

Values rounding(Builder& b, const Args& a, const Context& c, const char* op) {
  Value x = cast_to(b, a[0].value(), c.out().dtype, c.out().shape);
  if (!is_float(x.dtype())) return {x};  // integers are already integral
  return {b.unary(op, x)};
}

TT_RULE({"aten::floor"}, [](Builder& b, const Args& a, const Context& c) { return rounding(b, a, c, "stablehlo.floor"); });
TT_RULE({"aten::ceil"}, [](Builder& b, const Args& a, const Context& c) { return rounding(b, a, c, "stablehlo.ceil"); });
TT_RULE({"aten::round"}, [](Builder& b, const Args& a, const Context& c) {
  return rounding(b, a, c, "stablehlo.round_nearest_even");
});
TT_RULE({"aten::trunc"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = cast_to(b, a[0].value(), c.out().dtype, c.out().shape);
  if (!is_float(x.dtype())) return Values{x};
  return Values{trunc_float(b, x)};
});

// round(x, decimals): as PyTorch, x * 10^d rounded half to even, then / 10^d
// (or / and * 10^-d for negative d).
TT_RULE({"aten::round.decimals"}, [](Builder& b, const Args& a, const Context& c) {
  int64_t d = a[1].i;
  if (!is_float(c.out().dtype)) throw LoweringError("round with decimals needs a floating-point tensor");
  bool neg = d < 0;
  double ten_pow = std::pow(10.0, static_cast<double>(neg ? -d : d));
  return Values{int_or_float(b, a, c, [&](Builder& b, Value x) {
    Value p = cst(b, x, ten_pow);
    if (neg) return b.mul(b.unary("stablehlo.round_nearest_even", b.div(x, p)), p);
    return b.div(b.unary("stablehlo.round_nearest_even", b.mul(x, p)), p);
  })};
});

TT_RULE({"aten::frac"}, [](Builder& b, const Args& a, const Context& c) {
  if (!is_float(c.out().dtype)) throw LoweringError("frac needs a floating-point tensor");
  return Values{int_or_float(b, a, c, [](Builder& b, Value x) { return b.sub(x, trunc_float(b, x)); })};
});

// frexp(x) -> (mantissa in [0.5, 1), int32 exponent) with x = m * 2^e, read
// from the f32 bits (f16/bf16 are exact in f32); 0, inf and NaN give (x, 0).
TT_RULE({"aten::frexp.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& mt = c.out(0);
  const Type& et = c.out(1);
  if (mt.dtype == DType::F64) throw LoweringError("frexp: float64 is not lowered yet");
  Value x = b.convert(a[0].value(), DType::F32);
  const Shape& s = x.shape();
  Value bits = b.bitcast_convert(x, DType::S32);
  Value field = b.and_(b.binary("stablehlo.shift_right_logical", bits, b.constant_int(23, DType::S32, s)),
                       b.constant_int(0xff, DType::S32, s));
  // Subnormals: scale by 2^24 first so that every finite non-zero is normal.
  Value sub = b.compare(field, b.constant_int(0, DType::S32, s), Cmp::EQ);
  Value xs = b.select(sub, b.mul(x, b.constant(16777216.0, DType::F32, s)), x);
  Value bits2 = b.bitcast_convert(xs, DType::S32);
  Value field2 = b.and_(b.binary("stablehlo.shift_right_logical", bits2, b.constant_int(23, DType::S32, s)),
                        b.constant_int(0xff, DType::S32, s));
  Value e = b.sub(field2, b.constant_int(126, DType::S32, s));
  e = b.select(sub, b.sub(e, b.constant_int(24, DType::S32, s)), e);
  Value mbits = b.or_(b.and_(bits2, b.constant_int(static_cast<int32_t>(0x807fffff), DType::S32, s)),
                      b.constant_int(126 << 23, DType::S32, s));
  Value m = b.bitcast_convert(mbits, DType::F32);
  Value special = b.or_(b.compare(x, b.constant(0, DType::F32, s), Cmp::EQ),
                        b.compare(b.abs(x), b.constant(std::numeric_limits<double>::infinity(), DType::F32, s),
                                  Cmp::GE));
  special = b.or_(special, b.compare(x, x, Cmp::NE));
  m = b.select(special, x, m);
  e = b.select(special, b.constant_int(0, DType::S32, s), e);
  return Values{b.convert(m, mt.dtype), b.convert(e, et.dtype)};
});

double finite_max(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

TT_RULE({"aten::nan_to_num"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = cast_to(b, a[0].value(), c.out().dtype, c.out().shape);
  if (!is_float(x.dtype())) return Values{x};
  auto opt = [&](size_t i, double dflt) {
    return a.size() > i && a[i].kind == Arg::Kind::Double ? a[i].d : dflt;
  };
  double m = finite_max(x.dtype());
  double nan = opt(1, 0.0), posinf = opt(2, m), neginf = opt(3, -m);
  Value inf = cst(b, x, std::numeric_limits<double>::infinity());
  Value r = b.select(b.compare(x, x, Cmp::NE), cst(b, x, nan), x);
  r = b.select(b.compare(x, inf, Cmp::EQ), cst(b, x, posinf), r);
  r = b.select(b.compare(x, b.neg(inf), Cmp::EQ), cst(b, x, neginf), r);
  return Values{r};
});

// ---- binary math -----------------------------------------------------------------------

using BinaryFn = std::function<Value(Builder&, Value, Value)>;

// Both operands promoted (the result type from the context), broadcast, and
// computed in f32 for f16/bf16.
Values binary_math(Builder& b, const Args& a, const Context& c, const BinaryFn& f, bool upcast_half = true) {
  const Type& out = c.out();
  DType ct = upcast_half ? compute_dtype(out.dtype) : out.dtype;
  return {elementwise(b, {&a[0], &a[1]}, out, [&](Builder& b, const Values& x) { return f(b, x[0], x[1]); }, ct)};
}

Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }

TT_RULE({"aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar"},
        [](Builder& b, const Args& a, const Context& c) {
          if (c.out().dtype == DType::Pred) throw LoweringError("pow: bool result not supported");
          return binary_math(b, a, c, [](Builder& b, Value x, Value y) { return b.binary("stablehlo.power", x, y); });
        });

Value fmod_value(Builder& b, Value x, Value y) { return b.binary("stablehlo.remainder", x, y); }

// PyTorch's remainder: the result has the divisor's sign (Python's %).
Value remainder_value(Builder& b, Value x, Value y) {
  Value r = fmod_value(b, x, y);
  if (hlo::is_unsigned(x.dtype())) return r;
  Value zero = cst(b, r, 0);
  Value fix = b.and_(b.compare(r, zero, Cmp::NE),
                     b.compare(b.compare(r, zero, Cmp::LT), b.compare(y, zero, Cmp::LT), Cmp::NE));
  return b.select(fix, b.add(r, y), r);
}

// Integer division by zero: XLA defines x % 0 (no trap); keep it from
// reaching the device as an undefined operation by dividing by 1 instead.
// The CPU raises ZeroDivisionError for it, a device check here.
Value safe_int_divisor(Builder& b, Value y) {
  if (is_float(y.dtype())) return y;
  Value zero = cst(b, y, 0);
  return b.select(b.compare(y, zero, Cmp::EQ), cst(b, y, 1), y);
}

TT_RULE({"aten::remainder.Tensor", "aten::remainder.Scalar", "aten::remainder.Scalar_Tensor"},
        [](Builder& b, const Args& a, const Context& c) {
          if (c.out().dtype == DType::Pred) throw LoweringError("remainder: bool not supported");
          return binary_math(b, a, c, [&c](Builder& b, Value x, Value y) {
            if (is_float(x.dtype())) return remainder_value(b, x, y);
            check_nonzero_divisor(b, c, y);
            Value zero = cst(b, y, 0);
            Value r = remainder_value(b, x, safe_int_divisor(b, y));
            return b.select(b.compare(y, zero, Cmp::EQ), x, r);
          });
        });

TT_RULE({"aten::fmod.Tensor", "aten::fmod.Scalar"}, [](Builder& b, const Args& a, const Context& c) {
  if (c.out().dtype == DType::Pred) throw LoweringError("fmod: bool not supported");
  return binary_math(b, a, c, [&c](Builder& b, Value x, Value y) {
    if (is_float(x.dtype())) return fmod_value(b, x, y);
    check_nonzero_divisor(b, c, y);
    Value zero = cst(b, y, 0);
    return b.select(b.compare(y, zero, Cmp::EQ), x, fmod_value(b, x, safe_int_divisor(b, y)));
  });
});

TT_RULE({"aten::atan2"}, [](Builder& b, const Args& a, const Context& c) {
  return binary_math(b, a, c, [](Builder& b, Value x, Value y) { return b.binary("stablehlo.atan2", x, y); });
});

// minimum/maximum propagate NaN; fmin/fmax ignore it.
Value min_max(Builder& b, Value x, Value y, bool is_max) {
  if (x.dtype() == DType::Pred) return is_max ? b.or_(x, y) : b.and_(x, y);
  Value m = is_max ? b.max(x, y) : b.min(x, y);
  if (!is_float(x.dtype())) return m;
  return b.select(is_nan(b, x), x, b.select(is_nan(b, y), y, m));
}

Value fmin_max(Builder& b, Value x, Value y, bool is_max) {
  Value m = min_max(b, x, y, is_max);
  if (!is_float(x.dtype())) return m;
  return b.select(is_nan(b, x), y, b.select(is_nan(b, y), x, m));
}

TT_RULE({"aten::maximum"}, [](Builder& b, const Args& a, const Context& c) {
  return binary_math(b, a, c, [](Builder& b, Value x, Value y) { return min_max(b, x, y, true); }, false);
});
TT_RULE({"aten::minimum"}, [](Builder& b, const Args& a, const Context& c) {
  return binary_math(b, a, c, [](Builder& b, Value x, Value y) { return min_max(b, x, y, false); }, false);
});
TT_RULE({"aten::fmax"}, [](Builder& b, const Args& a, const Context& c) {
  return binary_math(b, a, c, [](Builder& b, Value x, Value y) { return fmin_max(b, x, y, true); }, false);
});
TT_RULE({"aten::fmin"}, [](Builder& b, const Args& a, const Context& c) {
  return binary_math(b, a, c, [](Builder& b, Value x, Value y) { return fmin_max(b, x, y, false); }, false);
});

// clamp(x, min, max) = min(max(x, lo), hi): NaN in x or a bound propagates,
// and lo > hi gives hi, as in PyTorch.
Values clamp_rule(Builder& b, const Args& a, const Context& c, const Arg* lo, const Arg* hi) {
  const Type& out = c.out();
  if (out.dtype == DType::Pred) throw LoweringError("clamp: bool not supported");
  Value x = cast_to(b, a[0].value(), out.dtype, out.shape);
  if (lo && !lo->is_none()) x = min_max(b, x, cast_to(b, lo->value(), out.dtype, out.shape), true);
  if (hi && !hi->is_none()) x = min_max(b, x, cast_to(b, hi->value(), out.dtype, out.shape), false);
  return {x};
}

TT_RULE({"aten::clamp", "aten::clamp.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  return clamp_rule(b, a, c, a.size() > 1 ? &a[1] : nullptr, a.size() > 2 ? &a[2] : nullptr);
});
TT_RULE({"aten::clamp_min", "aten::clamp_min.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  return clamp_rule(b, a, c, &a[1], nullptr);
});
TT_RULE({"aten::clamp_max", "aten::clamp_max.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  return clamp_rule(b, a, c, nullptr, &a[1]);
});

// lerp: self + w * (end - self) for |w| < 0.5, else end - (end - self) * (1 - w)
// (PyTorch's formula, exact at both ends).
TT_RULE({"aten::lerp.Scalar", "aten::lerp.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value s = cast_to(b, a[0].value(), ct, out.shape);
  Value e = cast_to(b, a[1].value(), ct, out.shape);
  Value w = cast_to(b, a[2].value(), ct, out.shape);
  Value diff = b.sub(e, s);
  Value mag = b.abs(w);  // real for a complex weight
  Value small = b.compare(mag, cst(b, mag, 0.5), Cmp::LT);
  Value r = b.select(small, b.add(s, b.mul(w, diff)), b.sub(e, b.mul(diff, b.sub(cst(b, w, 1.0), w))));
  return Values{b.convert(r, out.dtype)};
});

// addcmul: self + value * t1 * t2; addcdiv: self + value * t1 / t2.
Values addc(Builder& b, const Args& a, const Context& c, bool divide) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value s = cast_to(b, a[0].value(), ct, out.shape);
  Value t1 = cast_to(b, a[1].value(), ct, out.shape);
  Value t2 = cast_to(b, a[2].value(), ct, out.shape);
  Value v = a.size() > 3 && !a[3].is_none() ? cast_to(b, a[3].value(), ct, out.shape) : cst(b, s, 1.0);
  if (ct == DType::Pred) {
    if (divide) throw LoweringError("addcdiv: bool not supported");
    return {b.or_(s, b.and_(v, b.and_(t1, t2)))};
  }
  Value vt1 = b.mul(v, t1);
  Value r = b.add(s, divide ? b.div(vt1, t2) : b.mul(vt1, t2));
  return {b.convert(r, out.dtype)};
}

TT_RULE({"aten::addcmul"}, [](Builder& b, const Args& a, const Context& c) { return addc(b, a, c, false); });
TT_RULE({"aten::addcdiv"}, [](Builder& b, const Args& a, const Context& c) {
  if (!is_float(c.out().dtype)) throw LoweringError("addcdiv: integer division is not supported");
  return addc(b, a, c, true);
});

// xlogy(x, y) = 0 where x == 0 (unless y is NaN), else x * log(y).
TT_RULE({"aten::xlogy.Tensor", "aten::xlogy.Scalar_Self", "aten::xlogy.Scalar_Other"},
        [](Builder& b, const Args& a, const Context& c) {
          if (!is_float(c.out().dtype)) throw LoweringError("xlogy: non-float result");
          return binary_math(b, a, c, [](Builder& b, Value x, Value y) {
            Value r = b.mul(x, b.log(y));
            Value zero = cst(b, x, 0);
            r = b.select(b.compare(x, zero, Cmp::EQ), zero, r);
            return b.select(is_nan(b, y), y, r);
          });
        });

// logaddexp(a, b) = max + log1p(exp(-|a - b|)); equal infinities give themselves.
TT_RULE({"aten::logaddexp"}, [](Builder& b, const Args& a, const Context& c) {
  if (!is_float(c.out().dtype)) throw LoweringError("logaddexp: non-float result");
  return binary_math(b, a, c, [](Builder& b, Value x, Value y) {
    Value m = b.max(x, y);
    Value d = b.neg(b.abs(b.sub(x, y)));
    Value r = b.add(m, b.unary("stablehlo.log_plus_one", b.exp(d)));
    Value inf = cst(b, x, std::numeric_limits<double>::infinity());
    Value same_inf = b.and_(b.compare(b.abs(x), inf, Cmp::EQ), b.compare(x, y, Cmp::EQ));
    return b.select(same_inf, x, r);
  });
});

}  // namespace
}  // namespace tt::lowering
