// Ops that rearrange a tensor into patches or pairs with static geometry:
// im2col (nn.functional.unfold) and col2im (fold), _pdist_forward (nn.functional.pdist) and
// nonzero_static (nonzero with a fixed result size).
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

DType upcast(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// im2col(self [N,] C, H, W, kernel_size, dilation, padding, stride)
//   -> [N,] C*kh*kw, L: each kernel offset is one strided slice of the padded
// input; rows are ordered channel-major, then kernel row, then kernel column.
TT_RULE({"aten::im2col"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = a[0].value();
  bool batched = x.rank() == 4;
  if (!batched) x = b.reshape(x, {1, x.shape()[0], x.shape()[1], x.shape()[2]});
  const auto &k = a[1].ints, &d = a[2].ints, &p = a[3].ints, &s = a[4].ints;
  int64_t n = x.shape()[0], ch = x.shape()[1];
  int64_t oh = (x.shape()[2] + 2 * p[0] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
  int64_t ow = (x.shape()[3] + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
  if (oh <= 0 || ow <= 0 || n * ch == 0) return Values{b.constant(0, out.dtype, out.shape)};
  Value padded = b.pad(x, b.constant(0, x.dtype()), {0, 0, p[0], p[1]}, {0, 0, p[0], p[1]}, {0, 0, 0, 0});
  Values cols;
  for (int64_t i = 0; i < k[0]; ++i) {
    for (int64_t j = 0; j < k[1]; ++j) {
      int64_t r0 = i * d[0], c0 = j * d[1];
      Value patch = b.slice(padded, {0, 0, r0, c0}, {n, ch, r0 + s[0] * (oh - 1) + 1, c0 + s[1] * (ow - 1) + 1},
                            {1, 1, s[0], s[1]});
      cols.push_back(b.reshape(patch, {n, ch, 1, oh * ow}));
    }
  }
  Value r = cols.size() == 1 ? cols[0] : b.concatenate(cols, 2);
  return Values{b.reshape(r, out.shape)};
});

// col2im(self [N,] C*kh*kw, L, output_size, kernel_size, dilation, padding,
//        stride) -> [N,] C, H, W (nn.functional.fold, and im2col's backward):
// each kernel offset's patch is spread back onto the padded canvas by an
// interior pad (the stride) and the overlaps summed.
TT_RULE({"aten::col2im"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = a[0].value();
  bool batched = x.rank() == 3;
  if (!batched) x = b.reshape(x, {1, x.shape()[0], x.shape()[1]});
  const auto &os = a[1].ints, &k = a[2].ints, &d = a[3].ints, &p = a[4].ints, &s = a[5].ints;
  int64_t n = x.shape()[0], kk = k[0] * k[1], ch = x.shape()[1] / kk;
  int64_t hp = os[0] + 2 * p[0], wp = os[1] + 2 * p[1];
  int64_t oh = (hp - d[0] * (k[0] - 1) - 1) / s[0] + 1, ow = (wp - d[1] * (k[1] - 1) - 1) / s[1] + 1;
  if (n * ch == 0 || oh <= 0 || ow <= 0 || oh * ow != x.shape()[2]) return Values{b.constant(0, out.dtype, out.shape)};
  // Accumulated in the tensor's own dtype, kernel offset by kernel offset, as
  // the CPU kernel adds (f16/bf16 sums then round the same way).
  DType ct = out.dtype;
  Value cols = b.reshape(x, {n, ch, kk, oh, ow});
  Value zero = b.constant(0, ct);
  Value canvas;
  for (int64_t i = 0; i < k[0]; ++i) {
    for (int64_t j = 0; j < k[1]; ++j) {
      int64_t q = i * k[1] + j, r0 = i * d[0], c0 = j * d[1];
      Value patch = b.reshape(b.slice(cols, {0, 0, q, 0, 0}, {n, ch, q + 1, oh, ow}), {n, ch, oh, ow});
      int64_t eh = s[0] * (oh - 1) + 1, ew = s[1] * (ow - 1) + 1;
      Value placed = b.pad(patch, zero, {0, 0, r0, c0}, {0, 0, hp - r0 - eh, wp - c0 - ew}, {0, 0, s[0] - 1, s[1] - 1});
      canvas = canvas.valid() ? b.add(canvas, placed) : placed;
    }
  }
  Value r = b.slice(canvas, {0, 0, p[0], p[1]}, {n, ch, p[0] + os[0], p[1] + os[1]});
  return Values{b.reshape(b.convert(r, out.dtype), out.shape)};
});

// _pdist_forward(self [N, M], p) -> the N(N-1)/2 distances between rows i < j,
// row-major: the differences x[j] - x[i] for each i, concatenated, then
// their p-norm (p = 0 counts non-zeros, p = inf takes the largest).
TT_RULE({"aten::_pdist_forward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  double p = a[1].d;
  if (p < 0) throw InvalidArgument("pdist only supports non-negative p values");
  DType ct = upcast(out.dtype);
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

// nonzero_static(self, size, fill_value) -> [size, ndim] int64: the first
// `size` non-zero positions in row-major order (a stable sort of the flat
// indices by "is zero"), rows past the count filled with fill_value.
TT_RULE({"aten::nonzero_static"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = a[0].value();
  int64_t size = a[1].i, fill = a[2].i, rank = x.rank();
  if (size < 0) throw InvalidArgument("nonzero_static: 'size' must be an non-negative integer");
  int64_t n = numel(x.shape());
  // A 0-d input has no coordinates: [size, 0].
  if (rank == 0 || size == 0 || n == 0) return Values{b.constant_int(fill, DType::S64, out.shape)};
  Value flat = b.reshape(x, {n});
  Value zero = x.dtype() == DType::Pred ? b.constant_int(0, DType::Pred, {n}) : b.constant(0, x.dtype(), {n});
  Value is_zero = b.convert(b.compare(flat, zero, Cmp::EQ), DType::S32);
  Value pos = b.iota(Type{DType::S64, {n}}, 0);
  Values sorted = b.sort({is_zero, pos}, 0, /*stable=*/true, [](Builder& b, const Values& v) {
    return Values{b.compare(v[0], v[1], Cmp::LT)};
  });
  Value count = reduce_sum(b, b.convert(b.sub(b.constant_int(1, DType::S32, {n}), is_zero), DType::S64), {0});
  Value idx = sorted[1];
  if (size < n) idx = b.slice(idx, {0}, {size});
  if (size > n) idx = b.pad(idx, b.constant_int(0, DType::S64), {0}, {size - n}, {0});
  // Unravel each flat index into coordinates, last dim fastest.
  Values coords(rank);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    Value q = b.div(idx, b.constant_int(stride, DType::S64, {size}));
    coords[d] = b.reshape(b.binary("stablehlo.remainder", q, b.constant_int(x.shape()[d], DType::S64, {size})),
                          {size, 1});
    stride *= x.shape()[d];
  }
  Value r = rank == 1 ? coords[0] : b.concatenate(coords, 1);
  Value row = b.iota(Type{DType::S64, {size, rank}}, 0);
  Value valid = b.compare(row, b.broadcast_in_dim(count, {size, rank}, {}), Cmp::LT);
  return Values{b.select(valid, r, b.constant_int(fill, DType::S64, {size, rank}))};
});

}  // namespace
}  // namespace tt::lowering
