// Searching, counting and masks: bucketize, searchsorted (without a sorter),
// histc, masked_scatter, frexp, logit_backward, norm (the legacy overloads,
// through linalg_vector_norm's rule) and _efficientzerotensor.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

DType upcast(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// For every value, how many boundaries lie below it (left: b < v) or at or
// below it (right: b <= v); boundaries is [.., M] and values [.., K] with the
// same leading dims, or boundaries is 1-D. NaN values sort last (count M).
Value count_below(Builder& b, Value bounds, Value vals, bool right, DType out) {
  DType t = promote_types(bounds.dtype(), vals.dtype());
  bounds = b.convert(bounds, t);
  vals = b.convert(vals, t);
  int64_t m = bounds.shape().back();
  Shape s = vals.shape();
  s.push_back(m);
  std::vector<int64_t> vdims, bdims;
  for (int64_t k = 0; k < vals.rank(); ++k) vdims.push_back(k);
  if (bounds.rank() == 1) {
    bdims = {vals.rank()};
  } else {
    for (int64_t k = 0; k + 1 < bounds.rank(); ++k) bdims.push_back(k);
    bdims.push_back(vals.rank());
  }
  Value bb = b.broadcast_in_dim(bounds, s, bdims), vv = b.broadcast_in_dim(vals, s, vdims);
  Value below = b.compare(bb, vv, right ? Cmp::LE : Cmp::LT);
  if (is_float(t)) below = b.or_(below, b.compare(vv, vv, Cmp::NE));
  return b.convert(reduce_sum(b, b.convert(below, DType::S64), {vals.rank()}), out);
}

// bucketize.Tensor(self, boundaries, out_int32, right) / bucketize.Scalar
TT_RULE({"aten::bucketize.Tensor", "aten::bucketize.Scalar"}, [](Builder& b, const Args& a, const Context& c) {
  Value bounds = a[1].value();
  if (bounds.rank() != 1) throw std::runtime_error("boundaries tensor must be 1 dimension");
  Value v = a[0].value();
  return Values{b.reshape(count_below(b, bounds, v, a[3].b, c.out().dtype), c.out().shape)};
});

// searchsorted.Tensor(sorted_sequence, self, out_int32, right, side, sorter)
TT_RULE({"aten::searchsorted.Tensor", "aten::searchsorted.Scalar"}, [](Builder& b, const Args& a, const Context& c) {
  if (a.size() > 5 && a[5].is_tensor()) throw LoweringError("searchsorted with a sorter is not lowered yet");
  bool right = a[3].b || (a.size() > 4 && a[4].kind == Arg::Kind::String && a[4].s == "right");
  Value seq = a[0].value(), v = a[1].value();
  if (seq.rank() > 1 && v.rank() == 0) throw LoweringError("searchsorted: scalar value with an N-D sequence");
  return Values{b.reshape(count_below(b, seq, v, right, c.out().dtype), c.out().shape)};
});

// histc(self, bins, min, max): equal-width bins over [min, max] (the data's
// range when min == max; widened by 1 each way when that is empty); values
// outside are ignored, max itself lands in the last bin.
TT_RULE({"aten::histc"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = is_float(out.dtype) ? (out.dtype == DType::F64 ? DType::F64 : DType::F32) : DType::F32;
  Value x = b.convert(a[0].value(), ct);
  int64_t n = numel(x.shape());
  x = b.reshape(x, {n});
  int64_t bins = a[1].i;
  Value lo = b.convert(a[2].value(), ct), hi = b.convert(a[3].value(), ct);
  Value same = b.compare(lo, hi, Cmp::EQ);
  if (n > 0) {
    lo = b.select(same, reduce_min(b, x, {0}), lo);
    hi = b.select(same, reduce_max(b, x, {0}), hi);
  }
  Value empty = b.compare(lo, hi, Cmp::EQ);
  Value one = b.constant(1, ct);
  lo = b.select(empty, b.sub(lo, one), lo);
  hi = b.select(empty, b.add(hi, one), hi);
  Value los = b.broadcast_to(lo, {n}), his = b.broadcast_to(hi, {n});
  Value pos = b.div(b.mul(b.sub(x, los), b.constant(static_cast<double>(bins), ct, {n})), b.sub(his, los));
  Value idx = b.convert(b.unary("stablehlo.floor", pos), DType::S64);
  idx = b.select(b.compare(x, his, Cmp::EQ), b.constant_int(bins - 1, DType::S64, {n}), idx);
  Value inside = b.and_(b.compare(x, los, Cmp::GE), b.compare(x, his, Cmp::LE));
  idx = b.select(inside, idx, b.constant_int(-1, DType::S64, {n}));
  Shape s{n, bins};
  Value hit = b.compare(b.broadcast_in_dim(idx, s, {0}), b.iota(Type{DType::S64, s}, 1), Cmp::EQ);
  Value counts = reduce_sum(b, b.convert(hit, DType::S64), {0});
  return Values{b.convert(counts, out.dtype)};
});

// Inclusive prefix sum along a 1-D value (a reduce_window).
Value prefix_sum(Builder& b, Value x) {
  int64_t n = x.shape()[0];
  return b.reduce_window({x}, {b.constant(0, x.dtype())}, {n}, {1}, {1}, {1}, {{n - 1, 0}},
                         [](Builder& b, const Values& v) { return Values{b.add(v[0], v[1])}; })[0];
}

// masked_scatter(self, mask, source): the k-th True position (in row-major
// order) takes source's k-th element.
TT_RULE({"aten::masked_scatter"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  int64_t n = numel(out.shape);
  Value self = cast_to(b, a[0].value(), out.dtype, out.shape);
  if (n == 0) return Values{self};
  Value mask = b.reshape(cast_to(b, a[1].value(), DType::Pred, out.shape), {n});
  Value src = b.convert(a[2].value(), out.dtype);
  int64_t m = numel(src.shape());
  if (m == 0) return Values{self};
  src = b.reshape(src, {m});
  Value k = b.sub(prefix_sum(b, b.convert(mask, DType::S64)), b.constant_int(1, DType::S64, {n}));
  k = b.clamp(b.constant_int(0, DType::S64, {n}), k, b.constant_int(m - 1, DType::S64, {n}));
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  Value taken = b.gather(src, b.reshape(k, {n, 1}), dn, {1}, {n});
  return Values{b.reshape(b.select(mask, taken, b.reshape(self, {n})), out.shape)};
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
                        b.compare(b.abs(x), b.constant(std::numeric_limits<double>::infinity(), DType::F32, s), Cmp::GE));
  special = b.or_(special, b.compare(x, x, Cmp::NE));
  m = b.select(special, x, m);
  e = b.select(special, b.constant_int(0, DType::S32, s), e);
  return Values{b.convert(m, mt.dtype), b.convert(e, et.dtype)};
});

// logit_backward(grad, self, eps?): grad / (x (1 - x)); with eps, 0 outside
// [eps, 1 - eps]; without, NaN outside [0, 1].
TT_RULE({"aten::logit_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = upcast(out.dtype);
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

// The legacy norm overloads: norm(self, p?, dim, keepdim[, dtype]) and
// norm(self, p[, dtype]) -> linalg_vector_norm(self, p, dim, keepdim, dtype).
// p picks the algorithm, so Scalars are static here too.
Values legacy_norm(Builder& b, const Args& a, const Context& c) {
  const Rule* vn = find_rule("aten::linalg_vector_norm");
  if (!vn) throw LoweringError("norm: linalg_vector_norm has no rule");
  Args v(5);
  v[0] = a[0];
  v[1] = a.size() > 1 ? a[1] : Arg{};
  if (v[1].is_none()) {
    v[1].kind = Arg::Kind::Scalar;
    v[1].d = 2.0;
    v[1].i = 2;
  }
  bool has_dim = a.size() > 2 && a[2].kind == Arg::Kind::IntList;
  if (has_dim) {
    v[2] = a[2];
    v[3] = a[3];
  } else {
    v[3].kind = Arg::Kind::Bool;
    v[3].b = false;
  }
  return vn->fn(b, v, c);
}
TT_RULE({"aten::norm.Scalar", "aten::norm.ScalarOpt_dim", "aten::norm.ScalarOpt_dim_dtype",
         "aten::norm.ScalarOpt_dtype"}, legacy_norm, false, /*static_scalars=*/true);

// _efficientzerotensor(size, dtype, ...): plain zeros (autograd's zero
// gradients; a dense zero tensor behaves the same).
TT_RULE({"aten::_efficientzerotensor"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  if (out.dtype == DType::Pred) return Values{b.constant_int(0, DType::Pred, out.shape)};
  return Values{b.constant(0, out.dtype, out.shape)};
});

}  // namespace
}  // namespace tt::lowering
