// Random ops on the device's counter-based generator (random_bits.h): the
// functional forms of uniform_, normal_, bernoulli_, random_, exponential_,
// geometric_, log_normal_, cauchy_, plus randperm, multinomial and
// native_dropout. All are registered with needs_rng.
#include <cmath>
#include <limits>

#include "lowering/device_check.h"
#include "lowering/helpers.h"
#include "lowering/random_bits.h"

namespace tt::lowering {
namespace {

constexpr bool kRng = true;

// aten::uniform(self, float from, float to, Generator?)
TT_RULE({"aten::uniform"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  if (a[1].d > a[2].d)  // checked by PyTorch's CPU kernel, not its meta kernel
    throw std::runtime_error("uniform_ expects to return a [from, to) range, but found from=" +
                             std::to_string(a[1].d) + " > to=" + std::to_string(a[2].d));
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

// A u64 constant of any value (constant_int takes an int64).
Value u64_constant(Builder& b, uint64_t v, const Shape& shape) {
  Value hi = b.constant_int(static_cast<int64_t>(v >> 32), DType::U64, shape);
  Value lo = b.constant_int(static_cast<int64_t>(v & 0xffffffffULL), DType::U64, shape);
  return b.or_(b.binary("stablehlo.shift_left", hi, b.constant_int(32, DType::U64, shape)), lo);
}

// Integers uniform in [lo, lo + span) as s64 (wrapping), span in 1 .. 2^64
// (span == 0 stands for 2^64): 64 random bits reduced modulo the span, as
// PyTorch's CPU kernel does.
Value random_ints(Builder& b, const Context& c, const Shape& shape, int64_t lo, uint64_t span) {
  auto [x0, x1] = threefry_bits(b, c.rng_seed, c.rng_offset, shape);
  Value hi64 = b.binary("stablehlo.shift_left", b.convert(x0, DType::U64), b.constant_int(32, DType::U64, shape));
  Value bits = b.or_(hi64, b.convert(x1, DType::U64));
  Value r = span == 0 ? bits : b.binary("stablehlo.remainder", bits, u64_constant(b, span, shape));
  return b.add(b.bitcast_convert(r, DType::S64), b.constant_int(lo, DType::S64, shape));
}

// The largest value random_ draws for a dtype when no `to` is given:
// 2^digits for floats (every integer up to it is exact), the type's max else.
int64_t random_max(DType t) {
  switch (t) {
    case DType::F64: return int64_t(1) << 53;
    case DType::F32: return int64_t(1) << 24;
    case DType::F16: return int64_t(1) << 11;
    case DType::BF16: return int64_t(1) << 8;
    case DType::Pred: return 1;
    case DType::U64: return std::numeric_limits<int64_t>::max();
    default:
      return hlo::is_unsigned(t) ? static_cast<int64_t>((uint64_t(1) << hlo::bit_width(t)) - 1)
                                 : static_cast<int64_t>((uint64_t(1) << (hlo::bit_width(t) - 1)) - 1);
  }
}

// random.from(self, int from, int? to), random.to(self, int to), random(self):
// uniform integers in [from, to), or [from, random_max] when to is None.
TT_RULE({"aten::random.from", "aten::random.to", "aten::random"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  int64_t lo = 0;
  __int128 hi_inclusive = 0;
  if (c.op == "aten::random.from") {
    lo = a[1].i;
    hi_inclusive = a[2].is_none() ? random_max(o.dtype) : static_cast<__int128>(a[2].i) - 1;
  } else if (c.op == "aten::random.to") {
    hi_inclusive = static_cast<__int128>(a[1].i) - 1;
  } else {
    hi_inclusive = random_max(o.dtype);
  }
  if (hi_inclusive < lo) {
    if (c.op == "aten::random.from" && a[2].is_none())
      throw std::runtime_error("random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' "
                               "casted to dtype, but got from=" + std::to_string(lo) +
                               " > to_inc=" + std::to_string(static_cast<int64_t>(hi_inclusive)));
    throw std::runtime_error("random_ expects 'from' to be less than 'to', but got from=" + std::to_string(lo) +
                             " >= to=" + std::to_string(static_cast<int64_t>(hi_inclusive + 1)));
  }
  __int128 span = hi_inclusive - lo + 1;  // 1 .. 2^64
  Value r = random_ints(b, c, o.shape, lo, static_cast<uint64_t>(span));  // 2^64 wraps to 0
  return Values{b.convert(r, o.dtype)};
}, kRng);

// exponential(self, lambd): -log(1 - u) / lambd.
TT_RULE({"aten::exponential"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value u = uniform01(b, c, o.shape, ct);
  Value e = b.div(b.neg(b.unary("stablehlo.log_plus_one", b.neg(u))), b.constant(a[1].d, ct, o.shape));
  return Values{b.convert(e, o.dtype)};
}, kRng);

// geometric(self, p): the number of Bernoulli(p) trials up to the first
// success, ceil(log(1 - u) / log(1 - p)), at least 1.
TT_RULE({"aten::geometric"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value u = uniform01(b, c, o.shape, ct);
  Value num = b.unary("stablehlo.log_plus_one", b.neg(u));
  Value den = b.constant(std::log1p(-a[1].d), ct, o.shape);
  Value k = b.max(b.unary("stablehlo.ceil", b.div(num, den)), b.constant(1, ct, o.shape));
  return Values{b.convert(k, o.dtype)};
}, kRng);

// log_normal(self, mean, std): exp(mean + std * z).
TT_RULE({"aten::log_normal"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value z = standard_normal(b, c, o.shape, ct);
  Value v = b.exp(b.add(b.constant(a[1].d, ct, o.shape), b.mul(z, b.constant(a[2].d, ct, o.shape))));
  return Values{b.convert(v, o.dtype)};
}, kRng);

// cauchy(self, median, sigma): median + sigma * tan(pi * (u - 1/2)).
TT_RULE({"aten::cauchy"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  DType ct = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value u = uniform01(b, c, o.shape, ct);
  Value t = b.unary("chlo.tan", b.mul(b.constant(M_PI, ct, o.shape), b.sub(u, b.constant(0.5, ct, o.shape))));
  Value v = b.add(b.constant(a[1].d, ct, o.shape), b.mul(t, b.constant(a[2].d, ct, o.shape)));
  return Values{b.convert(v, o.dtype)};
}, kRng);

// randperm(n, dtype, ...): sort random keys and carry the iota along.
TT_RULE({"aten::randperm", "aten::randperm.generator"}, [](Builder& b, const Args&, const Context& c) {
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

using hlo::Cmp;

// The CPU's checks of multinomial's weights w [rows, K], as device checks.
// Without replacement (or one sample) the op checks the whole tensor: any
// inf, NaN or negative entry, then any row summing to 0. With replacement
// its kernel walks the rows in order and raises for the first row with a
// problem: its first negative-or-NaN or infinite entry, else a sum <= 0.
void check_weights(Builder& b, const Context& c, Value w, bool per_row) {
  if (!c.checks || w.type.numel() == 0) return;
  const Shape& s = w.shape();
  int64_t rows = s[0], K = s[1];
  Value zero = b.constant(0, w.dtype(), s);
  Value neg_or_nan = b.not_(b.compare(w, zero, Cmp::GE));
  Value inf = b.compare(w, b.constant(std::numeric_limits<double>::infinity(), w.dtype(), s), Cmp::EQ);
  Value bad = b.or_(neg_or_nan, inf);
  Value sum_zero = b.compare(reduce_sum(b, w, {1}), b.constant(0, w.dtype(), {rows}), per_row ? Cmp::LE : Cmp::EQ);
  const std::string sum_message = "invalid multinomial distribution (sum of probabilities <= 0)";
  if (!per_row) {
    Value rows_i = b.iota(Type{DType::S64, {rows}}, 0);
    check_each(b, c, bad, b.iota(Type{DType::S64, s}, 0), CheckError::Runtime,
               "probability tensor contains either `inf`, `nan` or element < 0");
    check_each(b, c, sum_zero, rows_i, CheckError::Runtime, sum_message);
    return;
  }
  // Each row's problem: 1 a negative or NaN entry first, 2 an infinite one
  // first, 3 none but a sum <= 0, 0 none; the first row with one decides.
  Value col = b.iota(Type{DType::S64, s}, 1);
  Value first = reduce_min(b, b.select(bad, col, b.constant_int(K, DType::S64, s)), {1});
  Value at_first = b.compare(col, b.broadcast_in_dim(first, s, {0}), Cmp::EQ);
  Value first_neg = reduce_max(b, b.convert(b.and_(at_first, neg_or_nan), DType::S32), {1});
  Value any_bad = b.compare(first, b.constant_int(K, DType::S64, {rows}), Cmp::LT);
  Value i32 = b.constant_int(0, DType::S32, {rows});
  Value kind = b.select(any_bad, b.select(b.compare(first_neg, i32, Cmp::NE), b.constant_int(1, DType::S32, {rows}),
                                          b.constant_int(2, DType::S32, {rows})),
                        b.select(sum_zero, b.constant_int(3, DType::S32, {rows}), i32));
  Value row = b.iota(Type{DType::S64, {rows}}, 0);
  Value first_row = reduce_min(b, b.select(b.compare(kind, i32, Cmp::NE), row, b.constant_int(rows, DType::S64, {rows})), {0});
  Value decides = b.compare(row, b.broadcast_in_dim(first_row, {rows}, {}), Cmp::EQ);
  const char* messages[] = {"invalid multinomial distribution (encountering probability entry < 0)",
                            "invalid multinomial distribution (encountering probability entry = infinity or NaN)",
                            sum_message.c_str()};
  for (int k = 1; k <= 3; ++k)
    check_each(b, c, b.and_(decides, b.compare(kind, b.constant_int(k, DType::S32, {rows}), Cmp::EQ)), row,
               CheckError::Runtime, messages[k - 1]);
}

// multinomial(self, num_samples, replacement, generator): self is [K] or
// [rows, K] of non-negative weights. With replacement: inverse CDF of a
// uniform draw per sample. Without: the Gumbel-top-k trick (the num_samples
// largest log(p) + Gumbel noise), which never picks a zero-weight entry.
// Bad weights raise the CPU's errors (check_weights).
TT_RULE({"aten::multinomial"}, [](Builder& b, const Args& a, const Context& c) {
  Value p = a[0].value();
  const bool vec = p.rank() == 1;
  const int64_t K = p.shape().back(), rows = vec ? 1 : p.shape()[0], S = a[1].i;
  if (!a[2].b && S > K) throw InvalidArgument("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  check_weights(b, c, b.reshape(b.convert(p, compute_dtype(p.dtype())), {rows, K}), a[2].b && S > 1);
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
