// Resampling along the trailing spatial dims: reflection / replication
// padding and nearest / nearest-exact / (bi, tri)linear / bicubic upsampling
// (the 2-D ones also anti-aliased), 1-D to
// 3-D, with their backward ops. Every one of them maps each output position
// to a weighted choice of input positions independently per dim, so each dim
// is one product with an [out, in] matrix built from iotas (the backward is
// the product with its transpose). Index arithmetic follows PyTorch's CPU
// kernels (f32 scales, floor, clamping).
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// The dtype the products run in: f32 for half types, f64 for integers (exact
// for values up to 2^53), else the input's own.
DType resample_compute(DType t) {
  if (t == DType::F16 || t == DType::BF16) return DType::F32;
  if (hlo::is_float(t)) return t;
  return DType::F64;
}

// Applies m [out, in] along dim `d` of x: result[..., j, ...] = sum_i m[j, i] x[..., i, ...].
// With `transpose`, applies m^T (m [out, in] maps a gradient over out back to in).
Value apply_along(Builder& b, Value x, int64_t d, Value m, bool transpose) {
  int64_t r = x.rank();
  Value t = b.dot_general(x, m, {}, {}, {d}, {transpose ? 0 : 1}, x.dtype(), "HIGHEST");  // dim d moved last
  std::vector<int64_t> perm;
  for (int64_t p = 0; p < r; ++p) perm.push_back(p < d ? p : p == d ? r - 1 : p - 1);
  return b.transpose(t, perm);
}

// [out, in] selection matrix: 1 where in == src[out].
Value select_matrix(Builder& b, Value src, int64_t in, DType ct) {
  int64_t out = src.shape()[0];
  Value cols = b.iota(Type{DType::S64, {out, in}}, 1);
  Value hit = b.compare(cols, b.broadcast_in_dim(src, {out, in}, {0}), Cmp::EQ);
  return b.convert(hit, ct);
}

Value s64(Builder& b, int64_t v, int64_t n) { return b.constant_int(v, DType::S64, {n}); }

// Reflection (j - pad reflected at the edges without repeating them) or
// replication (clamped) source index of each of `out` positions.
Value pad_source(Builder& b, int64_t in, int64_t low, int64_t out, bool reflect) {
  Value i = b.sub(b.iota(Type{DType::S64, {out}}, 0), s64(b, low, out));
  if (!reflect) return b.clamp(s64(b, 0, out), i, s64(b, in - 1, out));
  Value last = s64(b, in - 1, out);
  return b.sub(last, b.abs(b.sub(last, b.abs(i))));
}

// PyTorch's compute_scales_value / area_pixel_compute_scale, in f32.
float source_scale(int64_t in, int64_t out, bool align_corners, const Arg* scale) {
  if (align_corners) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  if (scale && !scale->is_none() && scale->d > 0) return static_cast<float>(1.0 / scale->d);
  return static_cast<float>(in) / static_cast<float>(out);
}

// Nearest (or nearest-exact) source index of each output position.
Value nearest_source(Builder& b, int64_t in, int64_t out, const Arg* scale, bool exact) {
  Type it{DType::S64, {out}};
  if (!exact && out == in) return b.iota(it, 0);
  if (!exact && out == 2 * in) return b.binary("stablehlo.shift_right_arithmetic", b.iota(it, 0), s64(b, 1, out));
  float s = source_scale(in, out, false, scale);
  Value j = b.convert(b.iota(it, 0), DType::F32);
  if (exact) j = b.add(j, b.constant(0.5, DType::F32, {out}));
  Value src = b.convert(b.unary("stablehlo.floor", b.mul(j, b.constant(s, DType::F32, {out}))), DType::S64);
  return b.min(src, s64(b, in - 1, out));
}

// The [out, in] interpolation matrix of linear upsampling.
Value linear_matrix(Builder& b, int64_t in, int64_t out, bool align_corners, const Arg* scale, DType ct) {
  float s = source_scale(in, out, align_corners, scale);
  Shape v{out};
  Value j = b.convert(b.iota(Type{DType::S64, v}, 0), DType::F32);
  Value sc = b.constant(s, DType::F32, v);
  Value real;
  if (align_corners) {
    real = b.mul(sc, j);
  } else {
    real = b.sub(b.mul(sc, b.add(j, b.constant(0.5, DType::F32, v))), b.constant(0.5, DType::F32, v));
    real = b.max(real, b.constant(0, DType::F32, v));
  }
  Value i0 = b.min(b.convert(b.unary("stablehlo.floor", real), DType::S64), s64(b, in - 1, out));
  Value l1 = b.clamp(b.constant(0, DType::F32, v), b.sub(real, b.convert(i0, DType::F32)), b.constant(1, DType::F32, v));
  Value l0 = b.sub(b.constant(1, DType::F32, v), l1);
  Value i1 = b.add(i0, b.convert(b.compare(i0, s64(b, in - 1, out), Cmp::LT), DType::S64));
  Value m0 = b.mul(select_matrix(b, i0, in, DType::F32), b.broadcast_in_dim(l0, {out, in}, {0}));
  Value m1 = b.mul(select_matrix(b, i1, in, DType::F32), b.broadcast_in_dim(l1, {out, in}, {0}));
  return b.convert(b.add(m0, m1), ct);
}

// PyTorch's cubic convolution weights (A = -0.75) for |x| <= 1 and 1 < |x| < 2.
Value cubic_near(Builder& b, Value x, double A) {
  auto k = [&](double v) { return full_like(b, x, v); };
  return b.add(b.mul(b.mul(b.sub(b.mul(k(A + 2), x), k(A + 3)), x), x), k(1));
}
Value cubic_far(Builder& b, Value x, double A) {
  auto k = [&](double v) { return full_like(b, x, v); };
  return b.sub(b.mul(b.add(b.mul(b.sub(b.mul(k(A), x), k(5 * A)), x), k(8 * A)), x), k(4 * A));
}

// The [out, in] matrix of bicubic upsampling along one dim: output j reads
// input floor(real) - 1 .. + 2 (clamped to the edges, so edge taps add up)
// with the cubic convolution weights of t = real - floor(real); real is the
// source index without clamping at 0 (area_pixel_compute_source_index, cubic).
Value cubic_matrix(Builder& b, int64_t in, int64_t out, bool align_corners, const Arg* scale, DType ct) {
  const double A = -0.75;
  float s = source_scale(in, out, align_corners, scale);
  Shape v{out};
  Value j = b.convert(b.iota(Type{DType::S64, v}, 0), DType::F32);
  Value sc = b.constant(s, DType::F32, v);
  Value real = align_corners ? b.mul(sc, j)
                             : b.sub(b.mul(sc, b.add(j, b.constant(0.5, DType::F32, v))), b.constant(0.5, DType::F32, v));
  Value fl = b.unary("stablehlo.floor", real);
  Value t = b.sub(real, fl);
  Value i0 = b.convert(fl, DType::S64);
  Value one = b.constant(1, DType::F32, v);
  Value w[4] = {cubic_far(b, b.add(t, one), A), cubic_near(b, t, A), cubic_near(b, b.sub(one, t), A),
                cubic_far(b, b.sub(b.add(one, one), t), A)};
  Value m;
  for (int k = 0; k < 4; ++k) {
    Value idx = b.clamp(s64(b, 0, out), b.add(i0, s64(b, k - 1, out)), s64(b, in - 1, out));
    Value term = b.mul(select_matrix(b, idx, in, DType::F32), b.broadcast_in_dim(w[k], {out, in}, {0}));
    m = k == 0 ? term : b.add(m, term);
  }
  return b.convert(m, ct);
}

// x rounded half up to an integer (x + 0.5 truncated, for x >= -0.5), exact in
// f32: floor(x) plus one when the fraction reaches one half.
Value round_half_up(Builder& b, Value x) {
  Value f = b.unary("stablehlo.floor", x);
  Value up = b.compare(b.sub(x, f), full_like(b, x, 0.5), Cmp::GE);
  return b.convert(b.add(f, b.convert(up, x.dtype())), DType::S64);
}

// The [out, in] matrix of anti-aliased (PIL-style) bilinear or bicubic
// resampling along one dim, as PyTorch's CPU kernel computes its weights (in
// the input's type, f32 or f64): output j averages the inputs within
// `support` of center = scale * (j + 0.5) with the triangle filter (bilinear)
// or the cubic one with a = -0.5 (bicubic), stretched by the scale when
// downsampling, normalised to sum 1.
Value antialias_matrix(Builder& b, int64_t in, int64_t out, bool align_corners, const Arg* scale, bool cubic,
                       DType ct) {
  const DType wt = ct == DType::F64 ? DType::F64 : DType::F32;
  double s;
  if (wt == DType::F64) {
    if (align_corners) s = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    else if (scale && !scale->is_none() && scale->d > 0) s = 1.0 / scale->d;
    else s = static_cast<double>(in) / static_cast<double>(out);
  } else {
    s = source_scale(in, out, align_corners, scale);
  }
  const double interp = cubic ? 4.0 : 2.0;
  double support = s >= 1.0 ? interp * 0.5 * s : interp * 0.5;
  if (wt == DType::F32) support = static_cast<float>(support);
  const int64_t max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const double invscale = s >= 1.0 ? 1.0 / s : 1.0;
  Shape g{out, in};
  auto k = [&](double v) { return b.constant(v, wt, g); };
  auto i64 = [&](int64_t v) { return b.constant_int(v, DType::S64, g); };
  Value j = b.convert(b.iota(Type{DType::S64, g}, 0), wt);
  Value i = b.iota(Type{DType::S64, g}, 1);
  Value center = b.mul(k(s), b.add(j, k(0.5)));
  Value lo = b.max(round_half_up(b, b.sub(center, k(support))), i64(0));
  Value hi = b.min(round_half_up(b, b.add(center, k(support))), i64(in));
  Value taps = b.clamp(i64(0), b.sub(hi, lo), i64(max_taps));
  Value inside = b.and_(b.compare(i, lo, Cmp::GE), b.compare(i, b.add(lo, taps), Cmp::LT));
  Value x = b.abs(b.mul(b.add(b.sub(b.convert(i, wt), center), k(0.5)), k(invscale)));
  Value w;
  if (cubic) {
    const double A = -0.5;
    w = b.select(b.compare(x, k(1), Cmp::LT), cubic_near(b, x, A),
                 b.select(b.compare(x, k(2), Cmp::LT), cubic_far(b, x, A), k(0)));
  } else {
    w = b.select(b.compare(x, k(1), Cmp::LT), b.sub(k(1), x), k(0));
  }
  w = b.select(inside, w, k(0));
  Value total = b.broadcast_in_dim(reduce_sum(b, w, {1}), g, {0});
  w = b.select(b.compare(total, k(0), Cmp::NE), b.div(w, total), w);
  return b.convert(w, ct);
}

// Applies per-dim matrices over the trailing `mats.size()` dims.
Value apply_all(Builder& b, Value x, const Values& mats, bool transpose) {
  int64_t k = static_cast<int64_t>(mats.size());
  for (int64_t i = 0; i < k; ++i) x = apply_along(b, x, x.rank() - k + i, mats[i], transpose);
  return x;
}

Values padding_matrices(Builder& b, const Shape& in, const std::vector<int64_t>& pad, bool reflect, DType ct,
                        const std::string& op) {
  int64_t k = static_cast<int64_t>(pad.size() / 2), r = static_cast<int64_t>(in.size());
  Values mats;
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = r - k + i;
    int64_t low = pad[2 * (k - 1 - i)], high = pad[2 * (k - 1 - i) + 1], n = in[d];
    // Negative replication padding crops (the clamped source index does it).
    if (reflect && (low < 0 || high < 0)) throw LoweringError(op + " with negative padding");
    if (reflect && (low >= n || high >= n))
      throw std::runtime_error("Argument #4: Padding size should be less than the corresponding input dimension, "
                               "but got: padding (" + std::to_string(low) + ", " + std::to_string(high) +
                               ") at dimension " + std::to_string(d) + " of input " + hlo::i64_list(in));
    mats.push_back(select_matrix(b, pad_source(b, n, low, n + low + high, reflect), n, ct));
  }
  return mats;
}

// reflection_padNd / replication_padNd(self, padding)
Values pad_rule(Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  bool reflect = c.op.find("reflection") != std::string::npos;
  DType ct = resample_compute(x.dtype());
  if (x.type.numel() == 0) return {full(b, 0, x.dtype(), c.out().shape)};
  Values mats = padding_matrices(b, x.shape(), a[1].ints, reflect, ct, c.op);
  return {b.convert(apply_all(b, b.convert(x, ct), mats, false), x.dtype())};
}

// reflection_padNd_backward / replication_padNd_backward(grad_output, self, padding)
Values pad_backward_rule(Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value();
  bool reflect = c.op.find("reflection") != std::string::npos;
  DType ct = resample_compute(g.dtype());
  if (x.type.numel() == 0) return {full(b, 0, g.dtype(), x.shape())};
  Values mats = padding_matrices(b, x.shape(), a[2].ints, reflect, ct, c.op);
  return {b.convert(apply_all(b, b.convert(g, ct), mats, true), g.dtype())};
}

TT_RULE({"aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d", "aten::replication_pad1d",
         "aten::replication_pad2d", "aten::replication_pad3d"}, pad_rule);
TT_RULE({"aten::reflection_pad1d_backward", "aten::reflection_pad2d_backward", "aten::reflection_pad3d_backward",
         "aten::replication_pad1d_backward", "aten::replication_pad2d_backward",
         "aten::replication_pad3d_backward"}, pad_backward_rule);

// Upsampling matrices for input sizes `in` (trailing k dims) and output sizes
// `out`; `first_scale` is the index of the first scales argument, `align`
// the align_corners argument index for linear modes (-1 otherwise).
Values upsample_matrices(Builder& b, const Args& a, const std::string& op, const Shape& in,
                         const std::vector<int64_t>& out, int first_scale, int align, DType ct) {
  int64_t k = static_cast<int64_t>(out.size()), r = static_cast<int64_t>(in.size());
  bool exact = op.find("nearest_exact") != std::string::npos;
  bool linear = op.find("linear") != std::string::npos;
  bool cubic = op.find("bicubic") != std::string::npos;
  bool antialias = op.find("_aa") != std::string::npos;
  Values mats;
  for (int64_t i = 0; i < k; ++i) {
    int64_t n = in[r - k + i];
    const Arg* scale = first_scale + i < static_cast<int64_t>(a.size()) ? &a[first_scale + i] : nullptr;
    if (antialias) mats.push_back(antialias_matrix(b, n, out[i], a[align].b, scale, cubic, ct));
    else if (cubic) mats.push_back(cubic_matrix(b, n, out[i], a[align].b, scale, ct));
    else if (linear) mats.push_back(linear_matrix(b, n, out[i], a[align].b, scale, ct));
    else mats.push_back(select_matrix(b, nearest_source(b, n, out[i], scale, exact), n, ct));
  }
  return mats;
}

// upsample_nearestNd / _upsample_nearest_exactNd(self, output_size, scales...)
// upsample_linear1d / bilinear2d / trilinear3d / bicubic2d and the anti-aliased
// _upsample_bilinear2d_aa / _upsample_bicubic2d_aa(self, output_size, align_corners, scales...)
Values upsample_rule(Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  bool linear = c.op.find("linear") != std::string::npos || c.op.find("bicubic") != std::string::npos;
  if (linear && !hlo::is_float(x.dtype())) throw LoweringError(c.op + " of integers");
  // PyTorch's CPU kernel computes anti-aliasing weights for f32 and f64 only.
  if (c.op.find("_aa") != std::string::npos && x.dtype() != DType::F32 && x.dtype() != DType::F64)
    throw LoweringError(c.op + " is implemented for float32 and float64 only");
  DType ct = resample_compute(x.dtype());
  if (x.type.numel() == 0 || c.out().numel() == 0) return {full(b, 0, x.dtype(), c.out().shape)};
  Values mats = upsample_matrices(b, a, c.op, x.shape(), a[1].ints, linear ? 3 : 2, linear ? 2 : -1, ct);
  return {b.convert(apply_all(b, b.convert(x, ct), mats, false), x.dtype())};
}

// ..._backward(grad_output, output_size, input_size, [align_corners,] scales...)
Values upsample_backward_rule(Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value();
  bool linear = c.op.find("linear") != std::string::npos || c.op.find("bicubic") != std::string::npos;
  DType ct = resample_compute(g.dtype());
  const Shape& in = a[2].ints;
  if (g.type.numel() == 0 || numel(in) == 0) return {full(b, 0, g.dtype(), in)};
  Values mats = upsample_matrices(b, a, c.op, in, a[1].ints, linear ? 4 : 3, linear ? 3 : -1, ct);
  return {b.convert(apply_all(b, b.convert(g, ct), mats, true), g.dtype())};
}

TT_RULE({"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
         "aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d", "aten::_upsample_nearest_exact3d",
         "aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d",
         "aten::upsample_bicubic2d", "aten::_upsample_bilinear2d_aa", "aten::_upsample_bicubic2d_aa"}, upsample_rule);
TT_RULE({"aten::upsample_nearest1d_backward", "aten::upsample_nearest2d_backward",
         "aten::upsample_nearest3d_backward", "aten::_upsample_nearest_exact1d_backward",
         "aten::_upsample_nearest_exact2d_backward", "aten::_upsample_nearest_exact3d_backward",
         "aten::upsample_linear1d_backward", "aten::upsample_bilinear2d_backward",
         "aten::upsample_trilinear3d_backward", "aten::upsample_bicubic2d_backward",
         "aten::_upsample_bilinear2d_aa_backward", "aten::_upsample_bicubic2d_aa_backward"}, upsample_backward_rule);

}  // namespace
}  // namespace tt::lowering
