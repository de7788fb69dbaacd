// The orthogonal polynomials of torch.special, each f(x, n) with n a tensor:
// special_chebyshev_polynomial_{t,u,v,w}, special_shifted_chebyshev_polynomial_
// {t,u,v,w}, special_hermite_polynomial_{h,he}, special_laguerre_polynomial_l
// and special_legendre_polynomial_p (and their x_scalar / n_scalar forms).
//
// As in PyTorch's CPU kernels (ATen/native/Math.h): n is truncated to an
// integer (a non-finite n counts as negative), n < 0 gives 0, the closed forms
// at x = +-1 (x = 0, 1 for the shifted ones) and the trigonometric forms for
// |x| < 1 and large n apply first, and otherwise the three-term recurrence
// runs n - 1 steps. Because n varies per element, the recurrence is one
// stablehlo.while over the largest n, each element stepping while j < n (and
// while its value is not NaN, where the CPU loop stops too).
#include <cmath>

#include "lowering/ops/special_eval.h"

namespace tt::lowering {
namespace {

using namespace special;

// One recurrence step: (j, x, p = P_{j-1}, q = P_j) -> P_{j+1}.
using StepFn = std::function<Value(Builder&, Value j, Value x, Value p, Value q)>;

// P_n for the elements where `live` holds (and n >= 2), from P_0 = 1 and
// P_1 = q1; other elements return q1 unchanged.
Value recurrence(Builder& b, Value x, Value n, Value live, Value q1, const StepFn& step) {
  Value n_eff = b.select(live, n, cst(b, n, 0));
  Value j0 = b.constant(1, x.dtype());
  Value p0 = cst(b, x, 1);
  Values out = b.while_loop(
      {j0, x, n_eff, p0, q1},
      [](Builder& b, const Values& s) {
        Value j = b.broadcast_to(s[0], s[2].shape());
        return Values{any(b, b.and_(b.compare(j, s[2], Cmp::LT), b.not_(is_nan(b, s[4]))))};
      },
      [&](Builder& b, const Values& s) {
        Value j = b.broadcast_to(s[0], s[2].shape());
        Value x = s[1], p = s[3], q = s[4];
        Value active = b.and_(b.compare(j, s[2], Cmp::LT), b.not_(is_nan(b, q)));
        Value r = step(b, j, x, p, q);
        return Values{b.add(s[0], b.constant(1, s[0].dtype())), x, s[2], b.select(active, q, p),
                      b.select(active, r, q)};
      });
  return out[4];
}

// n as the CPU kernel sees it after static_cast<int64_t>: truncated toward
// zero; NaN, infinities and values past int64's range become -1 (x86 turns
// them into INT64_MIN, a negative n).
Value integer_n(Builder& b, Value n) {
  Value t = b.select(lt(b, n, 0), b.unary("stablehlo.ceil", n), b.unary("stablehlo.floor", n));
  Value bad = b.or_(is_nan(b, n), ge(b, b.abs(n), 9.2233720368547758e18));
  return sel(b, bad, -1, t);
}

Value is_even(Builder& b, Value n) {
  Value half = b.unary("stablehlo.floor", b.mul(n, cst(b, n, 0.5)));
  return b.compare(b.add(half, half), n, Cmp::EQ);
}

// +v for even n, -v for odd n.
Value parity_sign(Builder& b, Value n, Value v) { return b.select(is_even(b, n), v, b.neg(v)); }

Value acos(Builder& b, Value x) { return b.unary("chlo.acos", x); }
Value cos(Builder& b, Value x) { return b.unary("stablehlo.cosine", x); }
Value sin(Builder& b, Value x) { return b.unary("stablehlo.sine", x); }

// The rule shape: promote x and n, compute f(x, n) in f32 (f64 for f64).
using PolyFn = std::function<Value(Builder&, Value x, Value n)>;
Values poly_rule(Builder& b, const Args& a, const Context& c, const PolyFn& f) {
  const Type& out = c.out();
  if (!hlo::is_float(out.dtype)) throw LoweringError(c.op + ": non-float result");
  return {elementwise(b, {&a[0], &a[1]}, out,
                      [&](Builder& b, const Values& v) { return f(b, v[0], integer_n(b, v[1])); },
                      compute_dtype(out.dtype))};
}

// The Chebyshev family shares the step r = 2y q - p; y is x (or 2x - 1 for
// the shifted ones, written y + y as the CPU kernel does).
Value cheb_step_r(Builder& b, Value y, Value p, Value q) { return b.sub(b.mul(b.add(y, y), q), p); }

Value cheb_recurrence(Builder& b, Value y, Value n, Value live, Value q1) {
  return recurrence(b, y, n, b.and_(live, ge(b, n, 2)), q1,
                    [](Builder& b, Value, Value y, Value p, Value q) { return cheb_step_r(b, y, p, q); });
}

// T_n(x): cos(n acos x) for n > 6, |x| < 1.
Value chebyshev_t(Builder& b, Value x, Value n) {
  Value ax = b.abs(x);
  Value unit = eq(b, ax, 1), trig = b.and_(gt(b, n, 6), lt(b, ax, 1));
  Value live = b.not_(b.or_(b.or_(lt(b, n, 0), unit), trig));
  Value r = cheb_recurrence(b, x, n, live, x);
  r = sel(b, eq(b, n, 0), 1, r);
  r = b.select(trig, cos(b, b.mul(n, acos(b, x))), r);
  Value one = cst(b, x, 1);
  r = b.select(unit, b.select(b.or_(gt(b, x, 0), is_even(b, n)), one, b.neg(one)), r);
  return sel(b, lt(b, n, 0), 0, r);
}

// U_n(x): sin((n + 1) acos x) / sin(acos x) for n > 8, |x| < 1.
Value chebyshev_u(Builder& b, Value x, Value n) {
  Value ax = b.abs(x), n1 = b.add(n, cst(b, n, 1));
  Value unit = eq(b, ax, 1), trig = b.and_(gt(b, n, 8), lt(b, ax, 1));
  Value live = b.not_(b.or_(b.or_(lt(b, n, 0), unit), trig));
  Value r = cheb_recurrence(b, x, n, live, b.add(x, x));
  r = sel(b, eq(b, n, 0), 1, r);
  Value t = acos(b, x), st = sin(b, t);
  Value tr = b.select(ne(b, st, 0), b.div(sin(b, b.mul(n1, t)), st),
                      b.div(b.mul(n1, cos(b, b.mul(n1, t))), x));
  r = b.select(trig, tr, r);
  r = b.select(unit, b.select(b.or_(gt(b, x, 0), is_even(b, n)), n1, b.neg(n1)), r);
  return sel(b, lt(b, n, 0), 0, r);
}

// V_n(x): cos((n + 1/2) acos x) / cos(acos(x) / 2) for n > 8, |x| < 1.
Value chebyshev_v(Builder& b, Value x, Value n) {
  Value ax = b.abs(x), n21 = b.add(b.add(n, n), cst(b, n, 1));
  Value unit = eq(b, ax, 1), trig = b.and_(gt(b, n, 8), lt(b, ax, 1));
  Value live = b.not_(b.or_(b.or_(lt(b, n, 0), unit), trig));
  Value r = cheb_recurrence(b, x, n, live, b.sub(b.add(x, x), cst(b, x, 1)));
  r = sel(b, eq(b, n, 0), 1, r);
  Value t = acos(b, x), h = b.div(t, cst(b, t, 2));
  Value tr = b.select(ne(b, sin(b, h), 1), b.div(cos(b, b.mul(b.add(n, cst(b, n, 0.5)), t)), cos(b, h)),
                      parity_sign(b, n, n21));
  r = b.select(trig, tr, r);
  r = b.select(unit, b.select(gt(b, x, 0), cst(b, x, 1), parity_sign(b, n, n21)), r);
  return sel(b, lt(b, n, 0), 0, r);
}

// W_n(x): sin((n + 1/2) acos x) / sin(acos(x) / 2) for n > 8, |x| < 1.
Value chebyshev_w(Builder& b, Value x, Value n) {
  Value ax = b.abs(x), n21 = b.add(b.add(n, n), cst(b, n, 1));
  Value unit = eq(b, ax, 1), trig = b.and_(gt(b, n, 8), lt(b, ax, 1));
  Value live = b.not_(b.or_(b.or_(lt(b, n, 0), unit), trig));
  Value r = cheb_recurrence(b, x, n, live, b.add(b.add(x, x), cst(b, x, 1)));
  r = sel(b, eq(b, n, 0), 1, r);
  Value at_one = b.select(gt(b, x, 0), n21, parity_sign(b, n, cst(b, x, 1)));
  Value t = acos(b, x), h = b.div(t, cst(b, t, 2));
  Value tr = b.select(ne(b, cos(b, h), 1), b.div(sin(b, b.mul(b.add(n, cst(b, n, 0.5)), t)), sin(b, h)), at_one);
  r = b.select(trig, tr, r);
  r = b.select(unit, at_one, r);
  return sel(b, lt(b, n, 0), 0, r);
}

// The shifted polynomials: P*_n(x) = P_n(2x - 1), with the closed forms at
// x = 1 and x = 0 and the trigonometric form for n > trig_n, |2x - 1| < 1.
struct Shifted {
  Value y, n, end1, end0, trig, live;
};
Shifted shifted(Builder& b, Value x, Value n, int trig_n) {
  Value y = b.sub(b.add(x, x), cst(b, x, 1));
  Value end1 = eq(b, x, 1), end0 = eq(b, x, 0);
  Value trig = b.and_(gt(b, n, trig_n), lt(b, b.abs(y), 1));
  Value live = b.not_(b.or_(b.or_(lt(b, n, 0), b.or_(end1, end0)), trig));
  return {y, n, end1, end0, trig, live};
}
Value shifted_finish(Builder& b, const Shifted& s, Value r, Value at1, Value at0) {
  r = b.select(s.end0, at0, r);
  r = b.select(s.end1, at1, r);
  return sel(b, lt(b, s.n, 0), 0, r);
}

Value shifted_t(Builder& b, Value x, Value n) {
  Shifted s = shifted(b, x, n, 6);
  Value r = cheb_recurrence(b, s.y, n, s.live, s.y);
  r = sel(b, eq(b, n, 0), 1, r);
  r = b.select(s.trig, cos(b, b.mul(n, acos(b, s.y))), r);
  return shifted_finish(b, s, r, cst(b, x, 1), parity_sign(b, n, cst(b, x, 1)));
}

Value shifted_u(Builder& b, Value x, Value n) {
  Shifted s = shifted(b, x, n, 6);
  Value y2 = b.add(s.y, s.y), n1 = b.add(n, cst(b, n, 1));
  Value r = cheb_recurrence(b, s.y, n, s.live, y2);
  r = sel(b, eq(b, n, 0), 1, r);
  Value t = acos(b, s.y), st = sin(b, t);
  Value tr = b.select(ne(b, st, 0), b.div(sin(b, b.mul(n1, t)), st),
                      b.div(b.mul(n1, cos(b, b.mul(n1, t))), s.y));
  r = b.select(s.trig, tr, r);
  return shifted_finish(b, s, r, n1, parity_sign(b, n, n1));
}

Value shifted_v(Builder& b, Value x, Value n) {
  Shifted s = shifted(b, x, n, 6);
  Value n21 = b.add(b.add(n, n), cst(b, n, 1));
  Value r = cheb_recurrence(b, s.y, n, s.live, b.sub(b.add(s.y, s.y), cst(b, x, 1)));
  r = sel(b, eq(b, n, 0), 1, r);
  Value t = acos(b, s.y), h = b.div(t, cst(b, t, 2));
  Value tr = b.select(ne(b, sin(b, h), 1), b.div(cos(b, b.mul(b.add(n, cst(b, n, 0.5)), t)), cos(b, h)),
                      parity_sign(b, n, n21));
  r = b.select(s.trig, tr, r);
  return shifted_finish(b, s, r, cst(b, x, 1), parity_sign(b, n, n21));
}

// The CPU kernel switches W* to its trigonometric form from n > 4.
Value shifted_w(Builder& b, Value x, Value n) {
  Shifted s = shifted(b, x, n, 4);
  Value n21 = b.add(b.add(n, n), cst(b, n, 1));
  Value r = cheb_recurrence(b, s.y, n, s.live, b.add(b.add(s.y, s.y), cst(b, x, 1)));
  r = sel(b, eq(b, n, 0), 1, r);
  Value t = acos(b, s.y), h = b.div(t, cst(b, t, 2));
  Value tr = b.select(ne(b, cos(b, h), 1), b.div(sin(b, b.mul(b.add(n, cst(b, n, 0.5)), t)), sin(b, h)),
                      parity_sign(b, n, cst(b, x, 1)));
  r = b.select(s.trig, tr, r);
  return shifted_finish(b, s, r, n21, parity_sign(b, n, cst(b, x, 1)));
}

// Hermite polynomials: n above a limit (128 in float, 512 in double, as in
// the CPU kernel) gives NaN.
double hermite_limit(DType t) { return t == DType::F64 ? 512 : 128; }

// H_{j+1} = 2x H_j - 2j H_{j-1}.
Value hermite_h(Builder& b, Value x, Value n) {
  Value big = gt(b, n, hermite_limit(x.dtype()));
  Value live = b.and_(ge(b, n, 2), b.not_(big));
  Value r = recurrence(b, x, n, live, b.add(x, x), [](Builder& b, Value j, Value x, Value p, Value q) {
    return b.sub(b.mul(b.add(x, x), q), b.mul(b.add(j, j), p));
  });
  r = sel(b, big, std::nan(""), r);
  r = sel(b, eq(b, n, 0), 1, r);
  return sel(b, lt(b, n, 0), 0, r);
}

// He_{j+1} = x He_j - j He_{j-1}.
Value hermite_he(Builder& b, Value x, Value n) {
  Value big = gt(b, n, hermite_limit(x.dtype()));
  Value live = b.and_(ge(b, n, 2), b.not_(big));
  Value r = recurrence(b, x, n, live, x, [](Builder& b, Value j, Value x, Value p, Value q) {
    return b.sub(b.mul(x, q), b.mul(j, p));
  });
  r = sel(b, big, std::nan(""), r);
  r = sel(b, eq(b, n, 0), 1, r);
  return sel(b, lt(b, n, 0), 0, r);
}

// L_{j+1} = ((2j + 1 - x) L_j - j L_{j-1}) / (j + 1); L_n(0) = 1.
Value laguerre_l(Builder& b, Value x, Value n) {
  Value zero_x = eq(b, b.abs(x), 0);
  Value live = b.and_(ge(b, n, 2), b.not_(b.or_(lt(b, n, 0), zero_x)));
  Value one_minus_x = b.sub(cst(b, x, 1), x);
  Value r = recurrence(b, x, n, live, one_minus_x, [](Builder& b, Value j, Value x, Value p, Value q) {
    Value t = b.mul(b.add(b.add(j, j), b.sub(cst(b, x, 1), x)), q);
    return b.div(b.sub(t, b.mul(j, p)), b.add(j, cst(b, j, 1)));
  });
  r = sel(b, eq(b, n, 0), 1, r);
  r = sel(b, zero_x, 1, r);
  return sel(b, lt(b, n, 0), 0, r);
}

// P_{j+1} = ((2j + 1) x P_j - j P_{j-1}) / (j + 1).
Value legendre_p(Builder& b, Value x, Value n) {
  Value unit = eq(b, b.abs(x), 1);
  Value live = b.and_(ge(b, n, 2), b.not_(b.or_(lt(b, n, 0), unit)));
  Value r = recurrence(b, x, n, live, x, [](Builder& b, Value j, Value x, Value p, Value q) {
    Value t = b.mul(b.mul(b.add(b.add(j, j), cst(b, j, 1)), x), q);
    return b.div(b.sub(t, b.mul(j, p)), b.add(j, cst(b, j, 1)));
  });
  r = sel(b, eq(b, n, 0), 1, r);
  Value one = cst(b, x, 1);
  r = b.select(unit, b.select(b.or_(gt(b, x, 0), is_even(b, n)), one, b.neg(one)), r);
  return sel(b, lt(b, n, 0), 0, r);
}

TT_RULE({"aten::special_chebyshev_polynomial_t", "aten::special_chebyshev_polynomial_t.x_scalar",
         "aten::special_chebyshev_polynomial_t.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, chebyshev_t); });
TT_RULE({"aten::special_chebyshev_polynomial_u", "aten::special_chebyshev_polynomial_u.x_scalar",
         "aten::special_chebyshev_polynomial_u.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, chebyshev_u); });
TT_RULE({"aten::special_chebyshev_polynomial_v", "aten::special_chebyshev_polynomial_v.x_scalar",
         "aten::special_chebyshev_polynomial_v.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, chebyshev_v); });
TT_RULE({"aten::special_chebyshev_polynomial_w", "aten::special_chebyshev_polynomial_w.x_scalar",
         "aten::special_chebyshev_polynomial_w.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, chebyshev_w); });
TT_RULE({"aten::special_shifted_chebyshev_polynomial_t", "aten::special_shifted_chebyshev_polynomial_t.x_scalar",
         "aten::special_shifted_chebyshev_polynomial_t.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, shifted_t); });
TT_RULE({"aten::special_shifted_chebyshev_polynomial_u", "aten::special_shifted_chebyshev_polynomial_u.x_scalar",
         "aten::special_shifted_chebyshev_polynomial_u.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, shifted_u); });
TT_RULE({"aten::special_shifted_chebyshev_polynomial_v", "aten::special_shifted_chebyshev_polynomial_v.x_scalar",
         "aten::special_shifted_chebyshev_polynomial_v.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, shifted_v); });
TT_RULE({"aten::special_shifted_chebyshev_polynomial_w", "aten::special_shifted_chebyshev_polynomial_w.x_scalar",
         "aten::special_shifted_chebyshev_polynomial_w.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, shifted_w); });
TT_RULE({"aten::special_hermite_polynomial_h", "aten::special_hermite_polynomial_h.x_scalar",
         "aten::special_hermite_polynomial_h.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, hermite_h); });
TT_RULE({"aten::special_hermite_polynomial_he", "aten::special_hermite_polynomial_he.x_scalar",
         "aten::special_hermite_polynomial_he.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, hermite_he); });
TT_RULE({"aten::special_laguerre_polynomial_l", "aten::special_laguerre_polynomial_l.x_scalar",
         "aten::special_laguerre_polynomial_l.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, laguerre_l); });
TT_RULE({"aten::special_legendre_polynomial_p", "aten::special_legendre_polynomial_p.x_scalar",
         "aten::special_legendre_polynomial_p.n_scalar"},
        [](Builder& b, const Args& a, const Context& c) { return poly_rule(b, a, c, legendre_p); });

}  // namespace
}  // namespace tt::lowering
