// Random ops on the device's counter-based generator (random_bits.h): the
// functional forms of uniform_, normal_, bernoulli_, random_, plus randperm
// and native_dropout. All are registered with needs_rng.
#include "lowering/helpers.h"
#include "lowering/random_bits.h"

namespace tt::lowering {
namespace {

constexpr bool kRng = true;

// aten::uniform(self, float from, float to, Generator?)
TT_RULE({"aten::uniform"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value u = uniform01(b, c, o.shape, ct);
  Value lo = b.constant(a[1].d, ct, o.shape), span = b.constant(a[2].d - a[1].d, ct, o.shape);
  Value r = b.convert(b.add(lo, b.mul(u, span)), o.dtype);
  // Rounding to a narrow type can reach `to`; keep the interval half-open.
  Value hi = b.constant(a[2].d, o.dtype, o.shape);
  return Values{b.select(b.compare(r, hi, hlo::Cmp::GE), b.constant(a[1].d, o.dtype, o.shape), r)};
}, kRng);

// aten::normal_functional(self, float mean, float std, Generator?)
TT_RULE({"aten::normal_functional"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value z = standard_normal(b, c, o.shape, ct);
  return Values{b.convert(b.add(b.constant(a[1].d, ct, o.shape), b.mul(z, b.constant(a[2].d, ct, o.shape))),
                          o.dtype)};
}, kRng);

// normal.Tensor_Tensor / Tensor_float / float_Tensor: mean and std broadcast.
TT_RULE({"aten::normal.Tensor_Tensor", "aten::normal.Tensor_float", "aten::normal.float_Tensor"},
        [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  auto operand = [&](const Arg& x) {
    return x.is_tensor() ? cast_to(b, x.value(), ct, o.shape) : b.constant(x.d, ct, o.shape);
  };
  Value z = standard_normal(b, c, o.shape, ct);
  return Values{b.convert(b.add(operand(a[0]), b.mul(z, operand(a[1]))), o.dtype)};
}, kRng);

// bernoulli.p(self, float p) and bernoulli(self) with probabilities in self.
TT_RULE({"aten::bernoulli.p", "aten::bernoulli", "aten::bernoulli.Tensor"},
        [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  Value u = uniform01(b, c, o.shape, DType::F32);
  Value p;
  if (c.op == "aten::bernoulli.p") p = b.constant(a[1].d, DType::F32, o.shape);
  else if (c.op == "aten::bernoulli.Tensor") p = cast_to(b, a[1].value(), DType::F32, o.shape);
  else p = cast_to(b, a[0].value(), DType::F32, o.shape);
  return Values{b.convert(b.compare(u, p, hlo::Cmp::LT), o.dtype)};
}, kRng);

// Integers uniform in [lo, hi): 64 random bits reduced modulo the range.
Value random_ints(Builder& b, const Context& c, const Shape& shape, Value lo, Value span, DType out) {
  auto [x0, x1] = threefry_bits(b, c.rng_seed, c.rng_offset, shape);
  Value hi64 = b.binary("stablehlo.shift_left", b.convert(x0, DType::U64), b.constant_int(32, DType::U64, shape));
  Value bits = b.or_(hi64, b.convert(x1, DType::U64));
  Value r = b.binary("stablehlo.remainder", bits, b.convert(span, DType::U64));
  return b.convert(b.add(b.convert(r, DType::S64), lo), out);
}

// random.from(self, int from, int? to), random.to(self, int to), random(self)
TT_RULE({"aten::random.from", "aten::random.to", "aten::random"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  int64_t lo = 0, hi = 0;
  if (c.op == "aten::random.from") {
    lo = a[1].i;
    if (a[2].is_none()) throw LoweringError("random_(from, None) is not supported on tpu yet");
    hi = a[2].i;
  } else if (c.op == "aten::random.to") {
    hi = a[1].i;
  } else {
    if (hlo::is_float(o.dtype)) hi = int64_t(1) << (o.dtype == DType::F64 ? 53 : o.dtype == DType::F32 ? 24 : 11);
    else if (o.dtype == DType::Pred) hi = 2;
    else hi = hlo::is_unsigned(o.dtype) ? (int64_t(1) << hlo::bit_width(o.dtype))
                                         : (int64_t(1) << (hlo::bit_width(o.dtype) - 1));
  }
  if (hi <= lo) throw LoweringError("random_ expects 'from' to be less than 'to'");
  Value r = random_ints(b, c, o.shape, b.constant_int(lo, DType::S64, o.shape),
                        b.constant_int(hi - lo, DType::S64, o.shape), DType::S64);
  return Values{b.convert(r, o.dtype)};
}, kRng);

// randperm(n, dtype, ...): sort random keys and carry the iota along.
TT_RULE({"aten::randperm"}, [](Builder& b, const Args&, const Context& c) {
  const Type& o = c.out();
  auto [x0, x1] = threefry_bits(b, c.rng_seed, c.rng_offset, o.shape);
  Value idx = b.iota(Type{DType::S64, o.shape}, 0);
  Values s = b.sort({x0, idx}, 0, true, [](Builder& bb, const Values& v) {
    return Values{bb.compare(v[0], v[1], hlo::Cmp::LT)};
  });
  return Values{b.convert(s[1], o.dtype)};
}, kRng);

// native_dropout(input, float p, bool? train) -> (output, mask)
TT_RULE({"aten::native_dropout"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  double p = a[1].d;
  bool train = a[2].is_none() ? true : a[2].b;
  if (!train || p == 0.0)
    return Values{x, b.constant(1, DType::Pred, x.shape())};
  Value u = uniform01(b, c, x.shape(), DType::F32);
  Value keep = b.compare(u, b.constant(1.0 - p, DType::F32, x.shape()), hlo::Cmp::LT);
  DType ct = to_float(x.dtype());
  double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Value y = b.mul(b.convert(x, DType::F32), b.constant(scale, DType::F32, x.shape()));
  y = b.select(keep, y, b.constant(0, DType::F32, x.shape()));
  return Values{b.convert(y, ct == x.dtype() ? x.dtype() : ct), keep};
}, kRng);

// native_dropout_backward(grad, mask, float scale)
TT_RULE({"aten::native_dropout_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value();
  Value m = b.convert(a[1].value(), g.dtype());
  return Values{b.mul(b.mul(g, m), b.constant(a[2].d, g.dtype(), g.shape()))};
});

// multinomial(self, num_samples, replacement, generator): self is [K] or
// [rows, K] of non-negative weights. With replacement: inverse CDF of a
// uniform draw per sample. Without: the Gumbel-top-k trick (the num_samples
// largest log(p) + Gumbel noise), which never picks a zero-weight entry.
TT_RULE({"aten::multinomial"}, [](Builder& b, const Args& a, const Context& c) {
  Value p = a[0].value();
  const bool vec = p.rank() == 1;
  const int64_t K = p.shape().back(), rows = vec ? 1 : p.shape()[0], S = a[1].i;
  Value w = b.reshape(b.convert(p, DType::F32), {rows, K});
  Value out;
  if (a[2].b) {
    // cdf[r, k] = sum_{j <= k} w[r, j], through a product with a triangle of ones.
    Type tt{DType::S64, {K, K}};
    Value tri = b.convert(b.compare(b.iota(tt, 0), b.iota(tt, 1), hlo::Cmp::LE), DType::F32);
    Value cdf = b.dot_general(w, tri, {}, {}, {1}, {0}, DType::F32);
    Value total = b.broadcast_in_dim(b.slice(cdf, {0, K - 1}, {rows, K}), {rows, S, K}, {0, 2});
    Value u = b.mul(uniform01(b, c, {rows, S, 1}, DType::F32), b.constant(1.0, DType::F32, {rows, S, 1}));
    Value target = b.mul(b.broadcast_in_dim(b.reshape(u, {rows, S}), {rows, S, K}, {0, 1}), total);
    Value below = b.compare(b.broadcast_in_dim(cdf, {rows, S, K}, {0, 2}), target, hlo::Cmp::LE);
    Value count = b.reduce(b.convert(below, DType::S64), b.constant_int(0, DType::S64), {2}, "stablehlo.add");
    out = b.min(count, b.constant_int(K - 1, DType::S64, {rows, S}));
  } else {
    Value u = uniform01(b, c, {rows, K}, DType::F32);
    Value tiny = b.constant(1e-20, DType::F32, {rows, K});
    Value gumbel = b.neg(b.log(b.neg(b.log(b.add(u, tiny)))));
    Value keys = b.add(b.log(w), gumbel);
    Value idx = b.iota(Type{DType::S64, {rows, K}}, 1);
    Values sorted = b.sort({keys, idx}, 1, true, [](Builder& bb, const Values& v) {
      return Values{bb.compare(v[0], v[1], hlo::Cmp::GT, true)};
    });
    out = b.slice(sorted[1], {0, 0}, {rows, S});
  }
  return Values{b.reshape(out, c.out().shape)};
}, kRng);

}  // namespace
}  // namespace tt::lowering
