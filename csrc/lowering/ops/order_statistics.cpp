// Order statistics along a dim or over the whole tensor: kthvalue, median and
// nanmedian (a stable sort with NaN last, then the entry at the wanted
// position), and mode (the most frequent value, by counting equal pairs).
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }
Value k64(Builder& b, int64_t v, const Shape& s) { return b.constant_int(v, DType::S64, s); }

// Stable ascending sort along `dim` with NaN last; (values, int64 indices).
Values sort_nan_last(Builder& b, Value x, int64_t dim) {
  bool fl = is_float(x.dtype());
  Value idx = b.iota(Type{DType::S64, x.shape()}, dim);
  return b.sort({x, idx}, dim, true, [fl](Builder& b, const Values& v) {
    Value less = b.compare(v[0], v[1], Cmp::LT);
    if (fl) less = b.or_(less, b.and_(is_nan(b, v[1]), b.not_(is_nan(b, v[0]))));
    return Values{less};
  });
}

// The entries at position k (a value shaped like the reduced dim's result)
// of `sorted` values and indices along `dim`.
Values pick(Builder& b, const Values& sorted, int64_t dim, Value k) {
  Shape s = sorted[0].shape();
  Value pos = b.iota(Type{DType::S64, s}, dim);
  Value hit = b.compare(pos, expand_reduced(b, k, s, {dim}), Cmp::EQ);
  Values r;
  for (Value v : sorted) r.push_back(reduce_sum(b, b.select(hit, v, b.constant(0, v.dtype(), s)), {dim}));
  return r;
}

// median / nanmedian: the lower median along `dim`; median gives the first NaN
// when there is one, nanmedian skips NaNs (all NaN: NaN).
Values median_along(Builder& b, Value x, int64_t dim, bool ignore_nan) {
  DType t = x.dtype();
  if (t == DType::Pred) x = b.convert(x, DType::U8);
  int64_t n = x.shape()[dim];
  Values sorted = sort_nan_last(b, x, dim);
  Shape rs = x.shape();
  rs.erase(rs.begin() + dim);
  Value k;
  if (!is_float(x.dtype())) {
    k = b.constant_int((n - 1) / 2, DType::S64, rs);
  } else {
    Value cnt = reduce_sum(b, b.convert(b.compare(x, x, Cmp::EQ), DType::S64), {dim});
    Value one = b.constant_int(1, DType::S64, rs), two = b.constant_int(2, DType::S64, rs);
    Value zero = b.constant_int(0, DType::S64, rs);
    if (ignore_nan) {
      k = b.max(b.div(b.sub(cnt, one), two), zero);
      k = b.select(b.compare(cnt, zero, Cmp::EQ), zero, k);
    } else {
      Value any_nan = b.compare(cnt, b.constant_int(n, DType::S64, rs), Cmp::LT);
      k = b.select(any_nan, cnt, b.constant_int((n - 1) / 2, DType::S64, rs));
    }
  }
  Values r = pick(b, sorted, dim, k);
  r[0] = b.convert(r[0], t);
  return r;
}

Values median_rule(Builder& b, const Args& a, const Context& c, bool ignore_nan) {
  Value x = a[0].value();
  bool whole = a.size() == 1;
  if (whole) {
    if (numel(x.shape()) == 0) throw std::runtime_error("median() input tensor cannot be empty");
    x = b.reshape(x, {numel(x.shape())});
  }
  if (x.rank() == 0) x = b.reshape(x, {1});
  int64_t dim = whole ? 0 : wrap_dim(a[1].i, x.rank());
  Values r = median_along(b, x, dim, ignore_nan);
  if (whole) return {b.reshape(r[0], c.out(0).shape)};
  return {b.reshape(r[0], c.out(0).shape), b.reshape(r[1], c.out(1).shape)};
}

TT_RULE({"aten::median", "aten::median.dim"},
        [](Builder& b, const Args& a, const Context& c) { return median_rule(b, a, c, false); });
TT_RULE({"aten::nanmedian", "aten::nanmedian.dim"},
        [](Builder& b, const Args& a, const Context& c) { return median_rule(b, a, c, true); });

// kthvalue(self, k, dim, keepdim): the k-th smallest (NaN counts as largest).
TT_RULE({"aten::kthvalue"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t k = a[1].i;
  if (x.rank() == 0) x = b.reshape(x, {1});
  int64_t dim = wrap_dim(a[2].i, x.rank());
  int64_t n = x.shape()[dim];
  if (k < 1 || k > n)
    throw std::runtime_error("kthvalue(): selected number k out of range for dimension " + std::to_string(dim));
  DType t = x.dtype();
  if (t == DType::Pred) x = b.convert(x, DType::U8);
  Values s = sort_nan_last(b, x, dim);
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape();
  start[dim] = k - 1;
  limit[dim] = k;
  return Values{b.reshape(b.convert(b.slice(s[0], start, limit), t), c.out(0).shape),
                b.reshape(b.slice(s[1], start, limit), c.out(1).shape)};
});

// mode(self, dim, keepdim) -> (values, indices): the most frequent value along
// dim (the smallest among equally frequent ones) and the index of its last
// occurrence, as the CPU kernel's sorted scan gives.
TT_RULE({"aten::mode"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Type& ov = c.out(0);
  const Type& oi = c.out(1);
  if (ov.numel() == 0 || x.type.numel() == 0)
    return Values{full(b, 0, ov.dtype, ov.shape), full(b, 0, DType::S64, oi.shape)};
  if (x.rank() == 0) return Values{x, b.constant_int(0, DType::S64)};
  int64_t d = wrap_dim(a[1].i, x.rank());
  DType t = x.dtype();
  Value xv = t == DType::Pred ? b.convert(x, DType::U8) : x;
  // Pairs: [.., n (i), n (j), ..]: x_i == x_j counted over j.
  Shape ps = xv.shape();
  ps.insert(ps.begin() + d + 1, xv.shape()[d]);
  std::vector<int64_t> di, dj;
  for (int64_t k = 0; k < xv.rank(); ++k) {
    di.push_back(k <= d ? k : k + 1);
    dj.push_back(k < d ? k : k + 1);
  }
  Value xi = b.broadcast_in_dim(xv, ps, di), xj = b.broadcast_in_dim(xv, ps, dj);
  Value freq = b.reduce(b.convert(b.compare(xi, xj, Cmp::EQ), DType::S64), b.constant_int(0, DType::S64), {d + 1},
                        "stablehlo.add");  // shaped like x
  Values best = b.reduce({freq, xv}, {b.constant_int(-1, DType::S64), b.constant(0, xv.dtype())}, {d},
                         [](Builder& bb, const Values& v) {
    Value af = v[0], av = v[1], xf = v[2], xv2 = v[3];
    Value take = bb.or_(bb.compare(xf, af, Cmp::GT),
                        bb.and_(bb.compare(xf, af, Cmp::EQ), bb.compare(xv2, av, Cmp::LT)));
    return Values{bb.select(take, xf, af), bb.select(take, xv2, av)};
  });
  Value mode = best[1];  // x's shape without d
  std::vector<int64_t> keep;
  for (int64_t k = 0; k < xv.rank(); ++k)
    if (k != d) keep.push_back(k);
  Value hit = b.compare(xv, b.broadcast_in_dim(mode, xv.shape(), keep), Cmp::EQ);
  Value pos = b.select(hit, b.iota(Type{DType::S64, xv.shape()}, d), k64(b, -1, xv.shape()));
  Value idx = b.reduce(pos, b.constant_int(-1, DType::S64), {d}, "stablehlo.maximum");
  return Values{b.reshape(b.convert(mode, t), ov.shape), b.reshape(idx, oi.shape)};
});

}  // namespace
}  // namespace tt::lowering
