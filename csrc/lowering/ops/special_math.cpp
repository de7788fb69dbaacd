// Elementwise math beyond the core set: copysign, heaviside, hypot,
// nextafter, logaddexp2, sinc, erfc, lgamma, digamma, angle (real inputs),
// special_xlog1py, special_entr, special_ndtri, special_zeta, special_i1e,
// polygamma (with digamma and trigamma as the CPU kernels compute them);
// the shrink activations (hardshrink, softshrink and their backwards),
// log_sigmoid_backward, prelu's kernel and its backward, glu and glu_backward.
// f16/bf16 compute in f32 and round once, as PyTorch's CPU kernels do.
#include <cmath>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/ops/special_eval.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

DType upcast(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }
Value cst(Builder& b, Value like, double v) { return full_like(b, like, v); }
Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }
constexpr double kPi = 3.14159265358979323846;

using Fn1 = std::function<Value(Builder&, Value)>;
using Fn2 = std::function<Value(Builder&, Value, Value)>;

// One tensor in, a float result (ints compute in the result's float type).
Values float1(Builder& b, const Args& a, const Context& c, const Fn1& f, DType compute = DType::Pred) {
  const Type& out = c.out();
  if (!is_float(out.dtype)) throw LoweringError(c.op + ": unsupported result type " + hlo::mlir_name(out.dtype));
  DType ct = compute == DType::Pred ? upcast(out.dtype) : compute;
  return {b.convert(f(b, cast_to(b, a[0].value(), ct, out.shape)), out.dtype)};
}

// Two operands promoted to the result type, computed in f32 for f16/bf16.
Values binary(Builder& b, const Args& a, const Context& c, const Fn2& f, bool needs_float = true) {
  const Type& out = c.out();
  if (needs_float && !is_float(out.dtype)) throw LoweringError(c.op + ": non-float result");
  return {elementwise(b, {&a[0], &a[1]}, out, [&](Builder& b, const Values& x) { return f(b, x[0], x[1]); },
                      upcast(out.dtype))};
}

Value sign_bit(Builder& b, Value x) {
  DType it = x.dtype() == DType::F64 ? DType::S64 : DType::S32;
  Value bits = b.bitcast_convert(x.dtype() == DType::F64 ? x : b.convert(x, DType::F32), it);
  return b.compare(bits, b.constant_int(0, it, x.shape()), Cmp::LT);
}

// ---- digamma, trigamma, zeta as PyTorch's CPU kernels compute them ---------------------

// digamma (calc_digamma): the reflection psi(x) = psi(1 - x) - pi / tan(pi x)
// for x < 0, recurrence up to x >= 10, then the asymptotic series. tan(pi x)
// is taken at x - round(x), which is exact, so that no digits are lost near
// the poles (the CPU kernel computes this term in double).
Value digamma_cpu(Builder& b, Value x) {
  Value zero = cst(b, x, 0), one = cst(b, x, 1);
  Value neg = b.compare(x, zero, Cmp::LT);
  Value trunc = b.select(neg, b.unary("stablehlo.ceil", x), b.unary("stablehlo.floor", x));
  Value is_int = b.compare(x, trunc, Cmp::EQ);
  Value frac = b.sub(x, b.unary("stablehlo.round_nearest_even", x));
  Value reflect = b.div(cst(b, x, kPi), b.unary("chlo.tan", b.mul(cst(b, x, kPi), frac)));
  Value y = b.select(neg, b.sub(one, x), x);
  Value result = zero;
  for (int i = 0; i < 10; ++i) {  // y >= 0 reaches 10 within ten steps
    Value below = b.compare(y, cst(b, y, 10), Cmp::LT);
    result = b.select(below, b.sub(result, b.div(one, y)), result);
    y = b.select(below, b.add(y, one), y);
  }
  static const std::vector<double> A = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                                        7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                        3.96825396825396825397E-3, -8.33333333333333333333E-3,
                                        8.33333333333333333333E-2};
  Value z = b.div(one, b.mul(y, y));
  Value poly = cst(b, z, A[0]);
  for (size_t i = 1; i < A.size(); ++i) poly = b.add(b.mul(poly, z), cst(b, z, A[i]));
  Value tail = b.select(b.compare(y, cst(b, y, 1.0e17), Cmp::LT), b.mul(z, poly), zero);
  Value r = b.sub(b.sub(b.add(result, b.log(y)), b.div(cst(b, y, 0.5), y)), tail);
  r = b.select(b.compare(y, cst(b, y, 10), Cmp::EQ), b.add(result, cst(b, y, 2.25175258906672110764)), r);
  r = b.select(neg, b.sub(r, reflect), r);
  r = b.select(b.and_(neg, is_int), cst(b, x, std::nan("")), r);
  // psi(+-0) = -+inf
  Value inf = b.select(sign_bit(b, x), cst(b, x, INFINITY), cst(b, x, -INFINITY));
  return b.select(b.compare(x, zero, Cmp::EQ), inf, r);
}

// trigamma: reflection for x < 0.5, six recurrence steps, then the
// asymptotic series (the CPU kernel's float and double versions).
Value trigamma_cpu(Builder& b, Value x) {
  Value one = cst(b, x, 1);
  Value refl = b.compare(x, cst(b, x, 0.5), Cmp::LT);
  Value pi = cst(b, x, kPi);
  Value s = b.unary("stablehlo.sine", b.mul(pi, x));
  Value result = b.select(refl, b.neg(b.div(b.mul(pi, pi), b.mul(s, s))), cst(b, x, 0));
  Value y = b.select(refl, b.sub(one, x), x);
  for (int i = 0; i < 6; ++i) {
    result = b.add(result, b.div(one, b.mul(y, y)));
    y = b.add(y, one);
  }
  Value ixx = b.div(one, b.mul(y, y));
  Value series = b.mul(ixx, b.sub(cst(b, x, 1.0 / 30), b.mul(ixx, cst(b, x, 1.0 / 42))));
  series = b.add(b.add(one, b.div(one, b.mul(cst(b, x, 2), y))), b.mul(ixx, b.sub(cst(b, x, 1.0 / 6), series)));
  result = b.add(result, b.div(series, y));
  return b.select(refl, b.neg(result), result);
}

// a^-m for a static integer m >= 1, by squaring.
Value inv_pow(Builder& b, Value a, int64_t m) {
  Value r, p = a;
  for (int64_t e = m; e; e >>= 1) {
    if (e & 1) r = r.valid() ? b.mul(r, p) : p;
    if (e > 1) p = b.mul(p, p);
  }
  return b.div(cst(b, a, 1), r);
}

// The Hurwitz zeta function zeta(s, q) for an integer s >= 2 (Cephes, as in
// PyTorch): direct sum of (q + k)^-s until k >= 9 and q + k > 9 (or the term
// is negligible), then the Euler-Maclaurin tail; +inf at q = 0, -1, -2, ...
Value hurwitz_zeta_int(Builder& b, int64_t s_int, Value q) {
  const double machep = 1.11022302462515654042E-16;
  Value s0 = inv_pow(b, q, s_int);
  Value done0 = b.compare(q, q, Cmp::NE);  // all false
  done0 = b.and_(done0, b.not_(done0));
  Value i0 = b.constant(0, DType::S32);
  auto running = [](Builder& b, Value i, Value a, Value done) {
    Value more = b.or_(b.broadcast_to(b.compare(i, b.constant(9, DType::S32), Cmp::LT), a.shape()),
                       b.compare(a, cst(b, a, 9), Cmp::LE));
    return b.and_(b.not_(done), more);
  };
  // state: i, a, b, s, done
  Values st = b.while_loop(
      {i0, q, cst(b, q, 0), s0, done0},
      [&](Builder& b, const Values& v) { return Values{special::any(b, running(b, v[0], v[1], v[4]))}; },
      [&](Builder& b, const Values& v) {
        Value act = running(b, v[0], v[1], v[4]);
        Value a = b.add(v[1], cst(b, q, 1));
        Value t = inv_pow(b, a, s_int);
        Value s = b.add(v[3], t);
        Value m = b.mul(cst(b, s, machep), s);
        Value small = b.and_(b.compare(b.neg(m), t, Cmp::LT), b.compare(t, m, Cmp::LT));
        return Values{b.add(v[0], b.constant(1, DType::S32)), b.select(act, a, v[1]), b.select(act, t, v[2]),
                      b.select(act, s, v[3]), b.or_(v[4], b.and_(act, small))};
      });
  Value a = st[1], t = st[2], s = st[3], done = st[4];
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  double sd = static_cast<double>(s_int);
  Value w = a;
  Value tail = b.sub(b.add(s, b.div(b.mul(t, w), cst(b, s, sd - 1))), b.mul(cst(b, s, 0.5), t));
  Value fa = cst(b, s, 1);
  double k = 0;
  for (int i = 0; i < 12; ++i) {
    fa = b.mul(fa, cst(b, s, sd + k));
    t = b.div(t, w);
    Value term = b.div(b.mul(fa, t), cst(b, s, A[i]));
    Value next = b.add(tail, term);
    Value stop = b.compare(b.abs(b.div(term, next)), cst(b, s, machep), Cmp::LT);
    tail = b.select(done, tail, next);
    done = b.or_(done, stop);
    k += 1;
    fa = b.mul(fa, cst(b, s, sd + k));
    t = b.div(t, w);
    k += 1;
  }
  Value r = b.select(st[4], s, tail);
  Value pole = b.and_(b.compare(q, cst(b, q, 0), Cmp::LE), b.compare(q, b.unary("stablehlo.floor", q), Cmp::EQ));
  return b.select(pole, cst(b, q, INFINITY), r);
}

TT_RULE({"aten::copysign.Tensor", "aten::copysign.Scalar"}, [](Builder& b, const Args& a, const Context& c) {
  return binary(b, a, c, [](Builder& b, Value x, Value y) {
    Value m = b.abs(x);
    return b.select(sign_bit(b, y), b.neg(m), m);
  });
});

// heaviside(x, values): values where x == 0, else (x > 0); keeps the
// promoted dtype (NaN gives 0, as the CPU kernel's comparison does).
TT_RULE({"aten::heaviside"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  return Values{elementwise(b, {&a[0], &a[1]}, out, [](Builder& b, const Values& x) {
    Value zero = cst(b, x[0], 0);
    Value step = b.convert(b.compare(x[0], zero, Cmp::GT), x[0].dtype());
    return b.select(b.compare(x[0], zero, Cmp::EQ), x[1], step);
  }, out.dtype)};
});

// hypot = m * sqrt(1 + (n/m)^2) with m = max(|x|, |y|): no overflow of x^2;
// an infinite operand gives +inf even when the other is NaN (C's hypot).
TT_RULE({"aten::hypot"}, [](Builder& b, const Args& a, const Context& c) {
  return binary(b, a, c, [](Builder& b, Value x, Value y) {
    Value ax = b.abs(x), ay = b.abs(y);
    Value m = b.max(ax, ay), n = b.min(ax, ay);
    Value zero = cst(b, m, 0), inf = cst(b, m, std::numeric_limits<double>::infinity());
    Value safe_m = b.select(b.compare(m, zero, Cmp::EQ), cst(b, m, 1), m);
    Value r = b.div(n, safe_m);
    Value h = b.mul(m, b.sqrt(b.add(cst(b, r, 1), b.mul(r, r))));
    h = b.select(b.or_(is_nan(b, x), is_nan(b, y)), cst(b, h, std::nan("")), h);
    h = b.select(b.or_(b.compare(ax, inf, Cmp::EQ), b.compare(ay, inf, Cmp::EQ)), inf, h);
    return h;
  });
});

TT_RULE({"aten::nextafter"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  return Values{elementwise(b, {&a[0], &a[1]}, out, [](Builder& b, const Values& x) {
    return b.binary("chlo.next_after", x[0], x[1]);
  }, out.dtype)};
});

// logaddexp2(a, b) = max + log2(1 + 2^-|a - b|); equal infinities give themselves.
TT_RULE({"aten::logaddexp2"}, [](Builder& b, const Args& a, const Context& c) {
  return binary(b, a, c, [](Builder& b, Value x, Value y) {
    Value m = b.max(x, y);
    Value d = b.neg(b.abs(b.sub(x, y)));
    Value p = b.binary("stablehlo.power", cst(b, d, 2.0), d);
    Value r = b.add(m, b.mul(b.unary("stablehlo.log_plus_one", p), cst(b, p, 1.0 / std::log(2.0))));
    Value inf = cst(b, x, std::numeric_limits<double>::infinity());
    Value same_inf = b.and_(b.compare(b.abs(x), inf, Cmp::EQ), b.compare(x, y, Cmp::EQ));
    return b.select(same_inf, x, r);
  });
});

TT_RULE({"aten::sinc"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value x) {
    Value px = b.mul(x, cst(b, x, kPi));
    Value r = b.div(b.unary("stablehlo.sine", px), px);
    return b.select(b.compare(x, cst(b, x, 0), Cmp::EQ), cst(b, x, 1), r);
  });
});

TT_RULE({"aten::erfc"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value x) { return b.unary("chlo.erfc", x); });
});
TT_RULE({"aten::lgamma"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value x) { return b.unary("chlo.lgamma", x); });
});
TT_RULE({"aten::digamma"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, digamma_cpu);
});
TT_RULE({"aten::special_i1e"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value x) { return b.unary("chlo.bessel_i1e", x); });
});

// polygamma(n, x): the n-th derivative of digamma, by the CPU kernel's
// methods: digamma (n = 0), trigamma (n = 1), and for n >= 2
// (-1)^(n+1) n! zeta(n + 1, x), the zeta sum in f64 for f32 (PyTorch's CPU
// accumulate type; f32 for f16/bf16).
TT_RULE({"aten::polygamma"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  if (!is_float(out.dtype)) throw LoweringError("polygamma: non-float result");
  int64_t n = a[0].i;
  if (n < 0) throw InvalidArgument("polygamma(n, x) does not support negative n.");
  DType ct = upcast(out.dtype);
  Value x = cast_to(b, a[1].value(), ct, out.shape);
  if (n == 0) return Values{b.convert(digamma_cpu(b, x), out.dtype)};
  if (n == 1) return Values{b.convert(trigamma_cpu(b, x), out.dtype)};
  DType acc = ct == DType::F32 && out.dtype == DType::F32 ? DType::F64 : ct;
  Value z = b.convert(hurwitz_zeta_int(b, n + 1, b.convert(x, acc)), ct);
  // n! as the kernel forms it, exp(lgamma(n + 1)) in the scalar type.
  double fac = ct == DType::F64 ? std::exp(std::lgamma(static_cast<double>(n) + 1.0))
                                : std::exp(std::lgamma(static_cast<float>(n) + 1.0f));
  Value r = b.mul(cst(b, z, n % 2 ? fac : -fac), z);
  return Values{b.convert(r, out.dtype)};
});

// angle of a real number: pi for negatives, 0 otherwise, NaN kept.
TT_RULE({"aten::angle"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value x) {
    Value r = b.select(b.compare(x, cst(b, x, 0), Cmp::LT), cst(b, x, kPi), cst(b, x, 0));
    return b.select(is_nan(b, x), x, r);
  });
});

// xlog1py(x, y) = 0 where x == 0 (unless y is NaN), else x * log1p(y).
TT_RULE({"aten::special_xlog1py", "aten::special_xlog1py.self_scalar", "aten::special_xlog1py.other_scalar"},
        [](Builder& b, const Args& a, const Context& c) {
          return binary(b, a, c, [](Builder& b, Value x, Value y) {
            Value zero = cst(b, x, 0);
            Value r = b.mul(x, b.unary("stablehlo.log_plus_one", y));
            r = b.select(b.compare(x, zero, Cmp::EQ), zero, r);
            return b.select(is_nan(b, y), y, r);
          });
        });

// entr(x) = -x log x for x > 0, 0 at 0, -inf for x < 0, NaN kept.
TT_RULE({"aten::special_entr"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value x) {
    Value zero = cst(b, x, 0);
    Value r = b.neg(b.mul(x, b.log(x)));
    r = b.select(b.compare(x, zero, Cmp::EQ), zero, r);
    r = b.select(b.compare(x, zero, Cmp::LT), cst(b, x, -std::numeric_limits<double>::infinity()), r);
    return b.select(is_nan(b, x), x, r);
  });
});

// ndtri(p) = sqrt(2) erfinv(2p - 1), in f64: 2p - 1 loses the tails in f32.
TT_RULE({"aten::special_ndtri"}, [](Builder& b, const Args& a, const Context& c) {
  return float1(b, a, c, [](Builder& b, Value p) {
    Value t = b.sub(b.mul(p, cst(b, p, 2.0)), cst(b, p, 1.0));
    return b.mul(b.unary("chlo.erf_inv", t), cst(b, p, std::sqrt(2.0)));
  }, DType::F64);
});

TT_RULE({"aten::special_zeta", "aten::special_zeta.self_scalar", "aten::special_zeta.other_scalar"},
        [](Builder& b, const Args& a, const Context& c) {
          return binary(b, a, c, [](Builder& b, Value x, Value q) { return b.binary("chlo.zeta", x, q); });
        });

// ---- activations ------------------------------------------------------------------------

// In [-lambd, lambd]: 0 (NaN propagates through x * 0).
Value shrink_band(Builder& b, Value x, Value lambd) {
  return b.and_(b.compare(x, b.neg(lambd), Cmp::GE), b.compare(x, lambd, Cmp::LE));
}

TT_RULE({"aten::hardshrink"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = cast_to(b, a[0].value(), upcast(out.dtype), out.shape);
  Value l = cast_to(b, a[1].value(), x.dtype(), out.shape);
  return Values{b.convert(b.select(shrink_band(b, x, l), b.mul(x, cst(b, x, 0)), x), out.dtype)};
});

TT_RULE({"aten::softshrink"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = cast_to(b, a[0].value(), upcast(out.dtype), out.shape);
  Value l = cast_to(b, a[1].value(), x.dtype(), out.shape);
  Value r = b.select(b.compare(x, l, Cmp::GT), b.sub(x, l),
                     b.select(b.compare(x, b.neg(l), Cmp::LT), b.add(x, l), b.mul(x, cst(b, x, 0))));
  return Values{b.convert(r, out.dtype)};
});

// hardshrink_backward / softshrink_backward(grad, self, lambd): grad outside the band.
TT_RULE({"aten::hardshrink_backward", "aten::softshrink_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value g = cast_to(b, a[0].value(), upcast(out.dtype), out.shape);
  Value x = cast_to(b, a[1].value(), g.dtype(), out.shape);
  Value l = cast_to(b, a[2].value(), g.dtype(), out.shape);
  return Values{b.convert(b.select(shrink_band(b, x, l), cst(b, g, 0), g), out.dtype)};
});

// d/dx log(sigmoid(x)) = sigmoid(-x); the CPU's `buffer` argument is not needed.
TT_RULE({"aten::log_sigmoid_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = upcast(out.dtype);
  Value g = cast_to(b, a[0].value(), ct, out.shape);
  Value x = cast_to(b, a[1].value(), ct, out.shape);
  return Values{b.convert(b.mul(g, b.unary("stablehlo.logistic", b.neg(x))), out.dtype)};
});

// log_sigmoid_forward(x) -> (output, buffer): min(x, 0) - log1p(exp(-|x|));
// the buffer (a CPU-kernel detail) is returned as zeros: the backward above
// does not read it.
TT_RULE({"aten::log_sigmoid_forward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out(0);
  DType ct = upcast(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape);
  Value r = b.sub(b.min(x, cst(b, x, 0)), b.unary("stablehlo.log_plus_one", b.exp(b.neg(b.abs(x)))));
  r = b.select(is_nan(b, x), x, r);
  return Values{b.convert(r, out.dtype), b.constant(0, c.out(1).dtype, c.out(1).shape)};
});

// _prelu_kernel(self, weight): weight already broadcasts against self.
TT_RULE({"aten::_prelu_kernel"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = upcast(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape);
  Value w = cast_to(b, a[1].value(), ct, out.shape);
  return Values{b.convert(b.select(b.compare(x, cst(b, x, 0), Cmp::GT), x, b.mul(w, x)), out.dtype)};
});

// Sums `x` (shape `full`) down to `target`, a shape that broadcasts to it.
Value sum_to(Builder& b, Value x, const Shape& target) {
  if (x.shape() == target) return x;
  int64_t lead = x.rank() - static_cast<int64_t>(target.size());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i < lead || (target[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  return b.reshape(reduce_sum(b, x, dims), target);
}

// _prelu_kernel_backward(grad, self, weight) -> (grad_self, grad_weight)
TT_RULE({"aten::_prelu_kernel_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& gx_t = c.out(0);
  const Type& gw_t = c.out(1);
  Shape full = broadcast_shapes({a[1].value().shape(), a[2].value().shape()});
  DType ct = upcast(gx_t.dtype);
  Value g = cast_to(b, a[0].value(), ct, full);
  Value x = cast_to(b, a[1].value(), ct, full);
  Value w = cast_to(b, a[2].value(), ct, full);
  Value pos = b.compare(x, cst(b, x, 0), Cmp::GT);
  Value gx = b.select(pos, g, b.mul(w, g));
  Value gw = b.select(pos, cst(b, g, 0), b.mul(x, g));
  return Values{b.convert(sum_to(b, gx, gx_t.shape), gx_t.dtype), b.convert(sum_to(b, gw, gw_t.shape), gw_t.dtype)};
});

// The two halves of `x` along `dim`.
std::pair<Value, Value> halves(Builder& b, Value x, int64_t dim) {
  std::vector<int64_t> start(x.rank(), 0), mid = x.shape(), limit = x.shape();
  int64_t h = x.shape()[dim] / 2;
  mid[dim] = h;
  Value lo = b.slice(x, start, mid);
  start[dim] = h;
  return {lo, b.slice(x, start, limit)};
}

// glu(x, dim) = a * sigmoid(b) for the halves a, b of x.
TT_RULE({"aten::glu"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (x.shape()[dim] % 2) throw std::runtime_error("Halving dimension must be even, but dimension " +
                                                   std::to_string(dim) + " is size " + std::to_string(x.shape()[dim]));
  DType ct = upcast(c.out().dtype);
  auto [p, q] = halves(b, b.convert(x, ct), dim);
  // The CPU kernel rounds sigmoid(b) to the tensor's dtype before the product.
  Value s = b.convert(b.convert(b.unary("stablehlo.logistic", q), c.out().dtype), ct);
  return Values{b.convert(b.mul(p, s), c.out().dtype)};
});

// glu_backward(grad, self, dim): d/da = g s(b); d/db = g a s(b) (1 - s(b)).
TT_RULE({"aten::glu_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[1].value();
  int64_t dim = wrap_dim(a[2].i, x.rank());
  DType ct = upcast(c.out().dtype);
  Value g = b.convert(a[0].value(), ct);
  auto [p, q] = halves(b, b.convert(x, ct), dim);
  Value s = b.unary("stablehlo.logistic", q);
  Value gp = b.mul(g, s);
  Value gq = b.mul(b.mul(gp, p), b.sub(cst(b, s, 1), s));
  return Values{b.convert(b.concatenate({gp, gq}, dim), c.out().dtype)};
});

}  // namespace
}  // namespace tt::lowering
