// Sliding-window patches with static geometry: im2col (nn.functional.unfold)
// and col2im (nn.functional.fold, and im2col's backward).
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

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

}  // namespace
}  // namespace tt::lowering
