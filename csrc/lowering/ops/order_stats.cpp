// Order statistics and scans: cummax, cummin, _logcumsumexp, kthvalue,
// median / nanmedian (whole tensor and along a dim), isin; and small
// structural ops: trace, linalg_cross, channel_shuffle, renorm,
// _cdist_forward, logspace.
//
// The scans compare every position with every earlier one (an n x n mask
// along the scanned dim): exact and simple, at O(n^2) work along that dim.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

DType upcast(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }
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
  DType ct = upcast(out.dtype);
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

// isin(elements, test_elements, assume_unique, invert): every element against
// every test element.
Values isin_rule(Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType t = promote({&a[0], &a[1]});
  Value e = cast_to(b, a[0].value(), t, out.shape);
  Value te = b.convert(a[1].value(), t);
  int64_t m = numel(te.shape());
  te = b.reshape(te, {m});
  Shape s = out.shape;
  s.push_back(m);
  std::vector<int64_t> lead;
  for (int64_t k = 0; k < out.rank(); ++k) lead.push_back(k);
  Value eq = b.compare(b.broadcast_in_dim(e, s, lead), b.broadcast_in_dim(te, s, {out.rank()}), Cmp::EQ);
  Value any = reduce_sum(b, eq, {out.rank()});
  bool invert = a.size() > 3 && a[3].kind == Arg::Kind::Bool && a[3].b;
  return {invert ? b.not_(any) : any};
}
TT_RULE({"aten::isin.Tensor_Tensor", "aten::isin.Tensor_Scalar", "aten::isin.Scalar_Tensor"}, isin_rule);

// trace: the sum of the main diagonal (integers accumulate in int64).
TT_RULE({"aten::trace"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  if (x.rank() != 2) throw std::runtime_error("trace: expected a matrix, but got tensor with dim " + std::to_string(x.rank()));
  DType acc = acc_dtype(c.out().dtype);
  x = b.convert(x, acc);
  Value diag = b.compare(b.iota(Type{DType::S64, x.shape()}, 0), b.iota(Type{DType::S64, x.shape()}, 1), Cmp::EQ);
  Value s = reduce_sum(b, b.select(diag, x, b.constant(0, acc, x.shape())), {0, 1});
  return Values{b.convert(s, c.out().dtype)};
});

// linalg_cross(self, other, dim): the 3-vector cross product along dim.
TT_RULE({"aten::linalg_cross"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  int64_t d = wrap_dim(a[2].i, out.rank());
  Value x = cast_to(b, a[0].value(), out.dtype, out.shape), y = cast_to(b, a[1].value(), out.dtype, out.shape);
  auto comp = [&](Value v, int64_t i) {
    std::vector<int64_t> start(out.rank(), 0), limit = out.shape;
    start[d] = i;
    limit[d] = i + 1;
    return b.slice(v, start, limit);
  };
  Value x0 = comp(x, 0), x1 = comp(x, 1), x2 = comp(x, 2), y0 = comp(y, 0), y1 = comp(y, 1), y2 = comp(y, 2);
  return Values{b.concatenate({b.sub(b.mul(x1, y2), b.mul(x2, y1)), b.sub(b.mul(x2, y0), b.mul(x0, y2)),
                               b.sub(b.mul(x0, y1), b.mul(x1, y0))}, d)};
});

// channel_shuffle(x, groups): [N, g, C/g, *] -> [N, C/g, g, *] -> [N, C, *].
TT_RULE({"aten::channel_shuffle", "aten::native_channel_shuffle"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t g = a[1].i;
  if (x.rank() < 3) throw std::runtime_error("channel_shuffle expects input to have at least 3 dimensions");
  if (g <= 0 || x.shape()[1] % g)
    throw std::runtime_error("Number of channels must be divisible by groups. Got " + std::to_string(x.shape()[1]) +
                             " channels and " + std::to_string(g) + " groups.");
  Shape s = x.shape();
  Shape split{s[0], g, s[1] / g};
  split.insert(split.end(), s.begin() + 2, s.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (int64_t k = 3; k < static_cast<int64_t>(split.size()); ++k) perm.push_back(k);
  return Values{b.reshape(b.transpose(b.reshape(x, split), perm), s)};
});

// renorm(x, p, dim, maxnorm): each slice along dim whose p-norm exceeds
// maxnorm is scaled by maxnorm / (norm + 1e-7), as PyTorch does.
TT_RULE({"aten::renorm"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = upcast(out.dtype);
  Value x = b.convert(a[0].value(), ct);
  int64_t d = wrap_dim(a[2].i, x.rank());
  std::vector<int64_t> others;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (k != d) others.push_back(k);
  Value p = cast_to(b, a[1].value(), ct, x.shape());
  Value norm = reduce_sum(b, b.binary("stablehlo.power", b.abs(x), p), others);
  Shape ns = norm.shape();
  Value pn = cast_to(b, a[1].value(), ct, ns);
  norm = b.binary("stablehlo.power", norm, b.div(b.constant(1, ct, ns), pn));
  // p = inf is the max norm (p is a runtime value: both are computed).
  Value inf_norm = reduce_max(b, b.abs(x), others);
  norm = b.select(b.compare(pn, b.constant(std::numeric_limits<double>::infinity(), ct, ns), Cmp::EQ), inf_norm, norm);
  Value maxn = cast_to(b, a[3].value(), ct, ns);
  Value f = b.select(b.compare(norm, maxn, Cmp::GT), b.div(maxn, b.add(norm, b.constant(1e-7, ct, ns))),
                     b.constant(1, ct, ns));
  return Values{b.convert(b.mul(x, expand_reduced(b, f, x.shape(), others)), out.dtype)};
});

// _cdist_forward(x1 [.., P, M], x2 [.., R, M], p, compute_mode) -> [.., P, R].
TT_RULE({"aten::_cdist_forward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  double p = a[2].d;
  DType ct = upcast(out.dtype);
  int64_t r = out.rank();
  int64_t m = a[0].value().shape().back();
  Shape s = out.shape;
  s.push_back(m);
  Shape s1(out.shape.begin(), out.shape.end() - 1), s2 = s1;
  s1.back() = a[0].value().shape()[a[0].value().rank() - 2];
  s1.push_back(m);
  s2.back() = a[1].value().shape()[a[1].value().rank() - 2];
  s2.push_back(m);
  Value x1 = cast_to(b, a[0].value(), ct, s1), x2 = cast_to(b, a[1].value(), ct, s2);
  std::vector<int64_t> d1, d2;
  for (int64_t k = 0; k <= r; ++k) {
    if (k != r - 1) d1.push_back(k);
    if (k != r - 2) d2.push_back(k);
  }
  Value diff = b.abs(b.sub(b.broadcast_in_dim(x1, s, d1), b.broadcast_in_dim(x2, s, d2)));
  Value res;
  if (p == 0) {
    res = reduce_sum(b, b.convert(b.compare(diff, b.constant(0, ct, s), Cmp::NE), ct), {r});
  } else if (std::isinf(p)) {
    res = reduce_max(b, diff, {r});
  } else if (p == 1) {
    res = reduce_sum(b, diff, {r});
  } else if (p == 2) {
    res = b.sqrt(reduce_sum(b, b.mul(diff, diff), {r}));
  } else {
    Value sum = reduce_sum(b, b.binary("stablehlo.power", diff, b.constant(p, ct, s)), {r});
    res = b.binary("stablehlo.power", sum, b.constant(1.0 / p, ct, out.shape));
  }
  return Values{b.convert(res, out.dtype)};
});

// logspace(start, end, steps, base): base ** (linspace's points), with
// linspace's two-sided stepping, in f64.
TT_RULE({"aten::logspace"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  if (!is_float(o.dtype)) throw LoweringError("integer logspace is not lowered yet");
  int64_t n = a[2].i;
  double base = a[3].d;
  Shape s{n};
  DType ct = DType::F64;
  Value start = cast_to(b, a[0].value(), ct, s), end = cast_to(b, a[1].value(), ct, s);
  Value e = start;
  if (n > 1) {
    Value step = b.div(b.sub(end, start), b.constant(static_cast<double>(n - 1), ct, s));
    Value i = b.iota(Type{ct, s}, 0);
    Value fwd = b.add(start, b.mul(i, step));
    Value bwd = b.sub(end, b.mul(b.sub(b.constant(static_cast<double>(n - 1), ct, s), i), step));
    e = b.select(b.compare(i, b.constant(static_cast<double>(n / 2), ct, s), Cmp::LT), fwd, bwd);
  }
  return Values{b.convert(b.binary("stablehlo.power", b.constant(base, ct, s), e), o.dtype)};
}, false, /*static_scalars=*/true);

}  // namespace
}  // namespace tt::lowering
