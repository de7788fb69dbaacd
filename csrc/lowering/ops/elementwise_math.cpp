// Elementwise math beyond unary_math.cpp's set: copysign, heaviside, hypot,
// nextafter, logaddexp2, sinc, erfc, angle (real inputs), and the torch.special
// ops that are closed forms: special_xlog1py and special_entr. The rule
// shapes float1 / binary and sign_bit come from special_eval.h.
// f16/bf16 compute in f32 and round once, as PyTorch's CPU kernels do.
#include <cmath>
#include <limits>

#include "lowering/ops/special_eval.h"

namespace tt::lowering {
namespace {

using namespace special;

constexpr double kPi = 3.14159265358979323846;

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

// angle of a real number: pi for negatives, 0 otherwise, NaN kept.
TT_RULE({"aten::angle"}, [](Builder& b, const Args& a, const Context& c) {
  Value z = a[0].value();
  if (hlo::is_complex(z.dtype()))  // atan2(imag, real), a real result
    return Values{b.convert(b.binary("stablehlo.atan2", b.imag(z), b.real(z)), c.out().dtype)};
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

}  // namespace
}  // namespace tt::lowering
