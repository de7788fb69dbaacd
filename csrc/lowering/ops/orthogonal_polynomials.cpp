// The classical orthogonal polynomials of torch.special, P_n(x) for tensors x
// and n (n truncated to an integer, as PyTorch's CPU kernel casts it):
// Chebyshev T/U/V/W and their shifted forms, Hermite H/He, Laguerre L,
// Legendre P. Each is its three-term recurrence run in a stablehlo.while up to
// the largest n in the tensor (elements with a smaller n stop updating), plus
// the closed forms and edge cases the CPU kernel takes (|x| == 1, trig
// formulas for large n inside (-1, 1), n < 0 gives 0), in the CPU's order of
// operations so that rounding agrees.
#include <cmath>
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// More iterations than any sane n: a NaN or infinite n must not hang.
constexpr double kMaxDegree = 1 << 20;

Value cst(Builder& b, Value like, double v) { return full_like(b, like, v); }
Value eq(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::EQ); }
Value gt(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::GT); }
Value lt(Builder& b, Value x, double v) { return b.compare(x, cst(b, x, v), Cmp::LT); }
Value acos(Builder& b, Value x) { return b.unary("chlo.acos", x); }
Value cos(Builder& b, Value x) { return b.unary("stablehlo.cosine", x); }
Value sin(Builder& b, Value x) { return b.unary("stablehlo.sine", x); }
Value is_even(Builder& b, Value n) {
  Value half = b.mul(n, cst(b, n, 0.5));
  return b.compare(b.unary("stablehlo.floor", half), half, Cmp::EQ);
}
// +v for even n, -v for odd n.
Value even_sign(Builder& b, Value n, Value v) { return b.select(is_even(b, n), v, b.neg(v)); }
Value two_n_plus_1(Builder& b, Value n) { return b.add(b.add(n, n), cst(b, n, 1)); }

// P_j from P_{j-2} (p) and P_{j-1} (q); j is shaped like x.
using Step = std::function<Value(Builder&, Value j, Value x, Value p, Value q)>;

// P_n by the recurrence from P_0 = 1 and P_1 = p1, for n >= 1 (other n are
// the caller's edge cases). A NaN x gives NaN. (The CPU kernels' loops stop
// at a NaN and return an uninitialised accumulator there: 0 or garbage.)
Value recurrence(Builder& b, Value x, Value n, Value p1, const Step& step) {
  const Shape& shape = x.shape();
  std::vector<int64_t> all(shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  Value top = shape.empty() ? n : reduce_max(b, n, all);
  top = b.min(top, b.constant(kMaxDegree, x.dtype()));
  Values init{b.constant(2, x.dtype()), cst(b, x, 1), p1, x, n, top};
  Values out = b.while_loop(
      init,
      [](Builder& bb, const Values& s) { return Values{bb.compare(s[0], s[5], Cmp::LE)}; },
      [&step, shape](Builder& bb, const Values& s) {
        Value j = bb.broadcast_to(s[0], shape);
        Value r = step(bb, j, s[3], s[1], s[2]);
        Value active = bb.compare(j, s[4], Cmp::LE);
        return Values{bb.add(s[0], bb.constant(1, s[0].dtype())), bb.select(active, s[2], s[1]),
                      bb.select(active, r, s[2]), s[3], s[4], s[5]};
      });
  return out[2];
}

// (x + x) * q - p: the Chebyshev recurrence, in the argument y (x or 2x - 1).
Step chebyshev_step(bool shifted) {
  return [shifted](Builder& b, Value, Value x, Value p, Value q) {
    Value y = shifted ? b.sub(b.add(x, x), cst(b, x, 1)) : x;
    return b.sub(b.mul(b.add(y, y), q), p);
  };
}

// The edge cases every polynomial shares: n == 0 gives 1, n < 0 gives 0;
// `special` (a mask and its value) applies between them, as in the CPU kernel.
Value finish(Builder& b, Value n, Value res, std::initializer_list<std::pair<Value, Value>> special) {
  res = b.select(eq(b, n, 0), cst(b, res, 1), res);
  // Later entries take precedence (they come first in the CPU kernel).
  for (const auto& [mask, value] : special) res = b.select(mask, value, res);
  return b.select(lt(b, n, 0), cst(b, res, 0), res);
}

enum class Cheb { T, U, V, W };

// Chebyshev polynomials of the four kinds; `shifted` evaluates at 2x - 1 with
// the shifted kernels' own edge tests (x == 1 and x == 0 instead of |x| == 1).
Value chebyshev(Builder& b, Value x, Value n, Cheb kind, bool shifted) {
  Value one = cst(b, x, 1);
  Value y = shifted ? b.sub(b.add(x, x), one) : x;
  Value p1;
  switch (kind) {
    case Cheb::T: p1 = y; break;
    case Cheb::U: p1 = b.add(y, y); break;
    case Cheb::V: p1 = b.sub(b.add(y, y), one); break;
    case Cheb::W: p1 = b.add(b.add(y, y), one); break;
  }
  Value res = recurrence(b, x, n, p1, chebyshev_step(shifted));

  // Closed forms for large n strictly inside the interval.
  double threshold = shifted ? (kind == Cheb::W ? 4 : 6) : (kind == Cheb::T ? 6 : 8);
  Value inside = b.and_(gt(b, n, threshold), lt(b, b.abs(y), 1));
  Value theta = acos(b, y);
  Value n1 = b.add(n, one), nh = b.add(n, cst(b, x, 0.5));
  Value tn = two_n_plus_1(b, n);
  Value trig;
  switch (kind) {
    case Cheb::T: trig = cos(b, b.mul(n, theta)); break;
    case Cheb::U: {
      Value s = sin(b, theta);
      trig = b.select(b.compare(s, cst(b, s, 0), Cmp::NE), b.div(sin(b, b.mul(n1, theta)), s),
                      b.mul(b.mul(n1, cos(b, b.mul(n1, theta))), y));
      break;
    }
    case Cheb::V: {
      Value half = b.mul(theta, cst(b, x, 0.5));
      trig = b.select(b.compare(sin(b, half), one, Cmp::NE), b.div(cos(b, b.mul(nh, theta)), cos(b, half)),
                      even_sign(b, n, tn));
      break;
    }
    case Cheb::W: {
      Value half = b.mul(theta, cst(b, x, 0.5));
      Value edge = shifted ? even_sign(b, n, one) : b.select(gt(b, x, 0), tn, even_sign(b, n, one));
      trig = b.select(b.compare(cos(b, half), one, Cmp::NE), b.div(sin(b, b.mul(nh, theta)), sin(b, half)), edge);
      break;
    }
  }

  // Values at the ends of the interval: +1 end (x == 1, or shifted x == 1)
  // and -1 end (x == -1, or shifted x == 0).
  Value at_top = eq(b, x, 1);
  Value at_bottom = shifted ? eq(b, x, 0) : eq(b, x, -1);
  Value top, bottom;
  switch (kind) {
    case Cheb::T: top = one; bottom = even_sign(b, n, one); break;
    case Cheb::U: top = n1; bottom = even_sign(b, n, n1); break;
    case Cheb::V: top = one; bottom = even_sign(b, n, tn); break;
    case Cheb::W: top = tn; bottom = even_sign(b, n, one); break;
  }
  return finish(b, n, res, {{inside, trig}, {at_bottom, bottom}, {at_top, top}});
}

Value hermite_h(Builder& b, Value x, Value n) {
  Value res = recurrence(b, x, n, b.add(x, x), [](Builder& b, Value j, Value x, Value p, Value q) {
    Value k = b.mul(b.sub(j, cst(b, j, 1)), cst(b, j, 2));
    return b.sub(b.mul(b.add(x, x), q), b.mul(k, p));
  });
  return finish(b, n, res, {});
}

Value hermite_he(Builder& b, Value x, Value n) {
  Value res = recurrence(b, x, n, x, [](Builder& b, Value j, Value x, Value p, Value q) {
    return b.sub(b.mul(x, q), b.mul(b.sub(j, cst(b, j, 1)), p));
  });
  return finish(b, n, res, {});
}

Value laguerre(Builder& b, Value x, Value n) {
  Value one = cst(b, x, 1);
  Value res = recurrence(b, x, n, b.sub(one, x), [](Builder& b, Value j, Value x, Value p, Value q) {
    Value k = b.sub(j, cst(b, j, 1));
    Value a = b.add(b.add(k, k), b.sub(cst(b, x, 1), x));
    return b.div(b.sub(b.mul(a, q), b.mul(k, p)), j);
  });
  return finish(b, n, res, {{eq(b, b.abs(x), 0), one}});
}

Value legendre(Builder& b, Value x, Value n) {
  Value one = cst(b, x, 1);
  Value res = recurrence(b, x, n, x, [](Builder& b, Value j, Value x, Value p, Value q) {
    Value k = b.sub(j, cst(b, j, 1));
    Value a = b.add(b.add(k, k), cst(b, k, 1));
    return b.div(b.sub(b.mul(b.mul(a, x), q), b.mul(k, p)), j);
  });
  Value end = b.select(gt(b, x, 0), one, even_sign(b, n, one));
  return finish(b, n, res, {{eq(b, b.abs(x), 1), end}});
}

using PolyFn = std::function<Value(Builder&, Value x, Value n)>;

// A rule for (x, n), promoted to the float result type. n is truncated toward
// zero; a NaN, infinite or out-of-range n gives 0, as the CPU kernel's cast to
// int64 (INT64_MIN on x86) does.
RuleFn polynomial(PolyFn f) {
  return [f](Builder& b, const Args& a, const Context& c) {
    const Type& out = c.out();
    if (!hlo::is_float(out.dtype)) throw LoweringError(c.op + ": non-float result");
    DType ct = out.dtype == DType::F16 || out.dtype == DType::BF16 ? DType::F32 : out.dtype;
    return Values{elementwise(b, {&a[0], &a[1]}, out, [&](Builder& b, const Values& v) {
      Value in_range = b.compare(b.abs(v[1]), cst(b, v[1], 9.2e18), Cmp::LT);  // false for NaN
      Value n = b.convert(b.convert(v[1], DType::S64), v[1].dtype());
      return f(b, v[0], b.select(in_range, n, cst(b, n, -1)));
    }, ct)};
  };
}

Value cheb_t(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::T, false); }
Value cheb_u(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::U, false); }
Value cheb_v(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::V, false); }
Value cheb_w(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::W, false); }
Value shifted_t(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::T, true); }
Value shifted_u(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::U, true); }
Value shifted_v(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::V, true); }
Value shifted_w(Builder& b, Value x, Value n) { return chebyshev(b, x, n, Cheb::W, true); }

TT_RULE({"aten::special_chebyshev_polynomial_t"}, polynomial(cheb_t));
TT_RULE({"aten::special_chebyshev_polynomial_u"}, polynomial(cheb_u));
TT_RULE({"aten::special_chebyshev_polynomial_v"}, polynomial(cheb_v));
TT_RULE({"aten::special_chebyshev_polynomial_w"}, polynomial(cheb_w));
TT_RULE({"aten::special_shifted_chebyshev_polynomial_t"}, polynomial(shifted_t));
TT_RULE({"aten::special_shifted_chebyshev_polynomial_u"}, polynomial(shifted_u));
TT_RULE({"aten::special_shifted_chebyshev_polynomial_v"}, polynomial(shifted_v));
TT_RULE({"aten::special_shifted_chebyshev_polynomial_w"}, polynomial(shifted_w));
TT_RULE({"aten::special_hermite_polynomial_h"}, polynomial(hermite_h));
TT_RULE({"aten::special_hermite_polynomial_he"}, polynomial(hermite_he));
TT_RULE({"aten::special_laguerre_polynomial_l"}, polynomial(laguerre));
TT_RULE({"aten::special_legendre_polynomial_p"}, polynomial(legendre));

}  // namespace
}  // namespace tt::lowering
