// Searching and counting against other values: bucketize, searchsorted
// (without a sorter), isin and histc.
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

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

}  // namespace
}  // namespace tt::lowering
