// Distances between rows: _cdist_forward (torch.cdist, every row of x1
// against every row of x2) and _pdist_forward (nn.functional.pdist, the rows
// i < j of one matrix).
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;


// _cdist_forward(x1 [.., P, M], x2 [.., R, M], p, compute_mode) -> [.., P, R].
TT_RULE({"aten::_cdist_forward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  double p = a[2].d;
  DType ct = compute_dtype(out.dtype);
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

// _pdist_forward(self [N, M], p) -> the N(N-1)/2 distances between rows i < j,
// row-major: the differences x[j] - x[i] for each i, concatenated, then
// their p-norm (p = 0 counts non-zeros, p = inf takes the largest).
TT_RULE({"aten::_pdist_forward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  double p = a[1].d;
  if (p < 0) throw InvalidArgument("pdist only supports non-negative p values");
  DType ct = compute_dtype(out.dtype);
  Value x = b.convert(a[0].value(), ct);
  int64_t n = x.shape()[0], m = x.shape()[1];
  if (out.shape[0] == 0) return Values{b.constant(0, out.dtype, out.shape)};
  if (m == 0) return Values{b.constant(0, out.dtype, out.shape)};
  Values diffs;
  for (int64_t i = 0; i + 1 < n; ++i) {
    Value row = b.broadcast_in_dim(b.reshape(b.slice(x, {i, 0}, {i + 1, m}), {m}), {n - i - 1, m}, {1});
    diffs.push_back(b.abs(b.sub(b.slice(x, {i + 1, 0}, {n, m}), row)));
  }
  Value diff = diffs.size() == 1 ? diffs[0] : b.concatenate(diffs, 0);
  Shape ds = diff.shape();
  Value res;
  if (p == 0) {
    res = reduce_sum(b, b.convert(b.compare(diff, b.constant(0, ct, ds), Cmp::NE), ct), {1});
  } else if (std::isinf(p)) {
    res = reduce_max(b, diff, {1});
  } else if (p == 1) {
    res = reduce_sum(b, diff, {1});
  } else if (p == 2) {
    res = b.sqrt(reduce_sum(b, b.mul(diff, diff), {1}));
  } else {
    Value pw = b.binary("stablehlo.power", diff, b.constant(p, ct, ds));
    Value sum = reduce_sum(b, pw, {1});
    res = b.binary("stablehlo.power", sum, b.constant(1.0 / p, ct, sum.shape()));
  }
  return Values{b.convert(res, out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
