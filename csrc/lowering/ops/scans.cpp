// Scans that carry more than a running sum: cummax and cummin (the running
// extreme and the latest index reaching it) and _logcumsumexp.
//
// The scans compare every position with every earlier one (an n x n mask
// along the scanned dim): exact and simple, at O(n^2) work along that dim.
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }

// x (shape S) seen as S[:d] + [n (i)] + [n (j)] + S[d+1:], holding x[.., j, ..],
// and the mask j <= i.
struct Pairs {
  Value x, mask, j;
};
Pairs pairs(Builder& b, Value x, int64_t d) {
  Shape t = x.shape();
  t.insert(t.begin() + d, x.shape()[d]);
  std::vector<int64_t> dims;
  for (int64_t k = 0; k < x.rank(); ++k) dims.push_back(k < d ? k : k + 1);
  Value xx = b.broadcast_in_dim(x, t, dims);
  Value i = b.iota(Type{DType::S64, t}, d), j = b.iota(Type{DType::S64, t}, d + 1);
  return {xx, b.compare(j, i, Cmp::LE), j};
}

// cummax / cummin: the running extreme and the latest index reaching it; NaN
// beats every number and, once seen, stays (the latest NaN's index).
Values cum_extreme(Builder& b, const Args& a, const Context& c, bool is_max) {
  Value x = a[0].value();
  DType t = x.dtype();
  if (x.rank() == 0) return {x, b.constant_int(0, DType::S64)};
  int64_t d = wrap_dim(a[1].i, x.rank());
  if (t == DType::Pred) x = b.convert(x, DType::U8);
  Pairs p = pairs(b, x, d);
  Value idx = b.select(p.mask, p.j, b.constant_int(-1, DType::S64, p.j.shape()));
  bool fl = is_float(x.dtype());
  Values r = b.reduce({p.x, idx}, {b.constant(0, x.dtype()), b.constant_int(-1, DType::S64)}, {d + 1},
                      [&](Builder& b, const Values& v) {
                        Value av = v[0], ai = v[1], bv = v[2], bi = v[3];
                        Value better = b.compare(bv, av, is_max ? Cmp::GT : Cmp::LT);
                        Value same = b.compare(bv, av, Cmp::EQ);
                        if (fl) {
                          Value an = is_nan(b, av), bn = is_nan(b, bv);
                          better = b.or_(b.and_(bn, b.not_(an)), b.and_(better, b.not_(an)));
                          same = b.or_(same, b.and_(an, bn));
                        }
                        Value zero = b.constant_int(0, DType::S64);
                        Value take = b.and_(b.compare(bi, zero, Cmp::GE),
                                            b.or_(b.compare(ai, zero, Cmp::LT),
                                                  b.or_(better, b.and_(same, b.compare(bi, ai, Cmp::GT)))));
                        return Values{b.select(take, bv, av), b.select(take, bi, ai)};
                      });
  return {b.convert(r[0], t), r[1]};
}

TT_RULE({"aten::cummax"}, [](Builder& b, const Args& a, const Context& c) { return cum_extreme(b, a, c, true); });
TT_RULE({"aten::cummin"}, [](Builder& b, const Args& a, const Context& c) { return cum_extreme(b, a, c, false); });

// logcumsumexp: per position, m + log(sum_j<=i exp(x_j - m)) with m the
// running max (taken as 0 where it is infinite, so inf and -inf come out right).
// (_logcumsumexp has no meta kernel: the result type is the input's.)
TT_RULE({"aten::_logcumsumexp"}, [](Builder& b, const Args& a, const Context& c) {
  const Type out = a[0].value().type;
  if (!is_float(out.dtype)) throw LoweringError("logcumsumexp: non-float input");
  DType ct = compute_dtype(out.dtype);
  Value x = b.convert(a[0].value(), ct);
  if (x.rank() == 0) return Values{b.convert(x, out.dtype)};
  int64_t d = wrap_dim(a[1].i, x.rank());
  Pairs p = pairs(b, x, d);
  double inf = std::numeric_limits<double>::infinity();
  Value masked = b.select(p.mask, p.x, b.constant(-inf, ct, p.x.shape()));
  Value m = reduce_max(b, masked, {d + 1});
  Value finite = b.compare(b.abs(m), b.constant(inf, ct, m.shape()), Cmp::NE);
  m = b.select(finite, m, b.constant(0, ct, m.shape()));
  Value mm = b.broadcast_in_dim(m, p.x.shape(), [&] {
    std::vector<int64_t> dims;
    for (int64_t k = 0; k <= x.rank(); ++k)
      if (k != d + 1) dims.push_back(k);
    return dims;
  }());
  Value s = reduce_sum(b, b.exp(b.sub(masked, mm)), {d + 1});
  return Values{b.convert(b.add(b.log(s), m), out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
