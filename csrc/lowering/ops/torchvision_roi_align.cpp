// torchvision::roi_align, torchvision::ps_roi_align and their backward ops.
//
// Each output bin [k, c, ph, pw] averages grid_h x grid_w bilinear samples of
// input[batch(k), c] inside the bin. The grid is sampling_ratio per side, or,
// where sampling_ratio <= 0, ceil(roi size / pooled size) per ROI: a count
// that depends on the boxes. So the samples are visited by a while loop over
// (iy, ix) up to the largest grid of any ROI, computed on the device; a ROI
// whose own grid is smaller masks the extra samples out. Every iteration
// gathers the four taps of one sample of every bin (forward) or scatter-adds
// the gradient to them (backward). The trip count is exact, not bounded: a
// ROI many times the pooled size costs as many iterations as the CPU's loop.
//
// Coordinates follow torchvision's CPU kernel (roi_align_kernel.cpp): the
// ROI is scaled and shifted by 0.5 when aligned, widened to at least 1 when
// not; samples outside [-1, size] read zero, others clamp into the input;
// all arithmetic in the input's dtype. ps_roi_align (position-sensitive)
// is the aligned form whose output channel c of bin (ph, pw) reads input
// channel (c * PH + ph) * PW + pw, and whose average divides by
// grid_h * grid_w unclamped (ps_roi_align_kernel.cpp).
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

struct RoiAlign {
  int64_t N, C, H, W, K, PH, PW;
  double scale;
  int64_t sampling_ratio;
  bool aligned;
  DType t;
  bool position_sensitive = false;
  int64_t C_out = 0;  // position-sensitive: C / (PH * PW)
};

void check_rois(const Value& rois) {
  if (rois.rank() != 2 || rois.shape()[1] != 5)
    throw InvalidArgument("rois must have shape as Tensor[K, 5]");
}

// Per-ROI geometry, each [K]: batch index (s64), start y/x, bin size y/x,
// grid h/w (s64, may be <= 0).
struct Geometry {
  Value batch, y0, x0, bin_h, bin_w, grid_h, grid_w;
};

Value column(Builder& b, Value rois, int64_t j) {
  int64_t K = rois.shape()[0];
  return b.reshape(b.slice(rois, {0, j}, {K, j + 1}), {K});
}

Geometry geometry(Builder& b, const RoiAlign& r, Value rois) {
  Shape k{r.K};
  auto c = [&](double v) { return b.constant(v, r.t, k); };
  Value off = c(r.aligned ? 0.5 : 0.0), sc = c(r.scale);
  Geometry g;
  g.batch = b.convert(column(b, rois, 0), DType::S64);
  Value x0 = b.sub(b.mul(column(b, rois, 1), sc), off), y0 = b.sub(b.mul(column(b, rois, 2), sc), off);
  Value x1 = b.sub(b.mul(column(b, rois, 3), sc), off), y1 = b.sub(b.mul(column(b, rois, 4), sc), off);
  Value rw = b.sub(x1, x0), rh = b.sub(y1, y0);
  if (!r.aligned) {
    rw = b.max(rw, c(1));
    rh = b.max(rh, c(1));
  }
  g.y0 = y0;
  g.x0 = x0;
  g.bin_h = b.div(rh, c(static_cast<double>(r.PH)));
  g.bin_w = b.div(rw, c(static_cast<double>(r.PW)));
  if (r.sampling_ratio > 0) {
    g.grid_h = g.grid_w = b.constant_int(r.sampling_ratio, DType::S64, k);
  } else {
    g.grid_h = b.convert(b.unary("stablehlo.ceil", g.bin_h), DType::S64);
    g.grid_w = b.convert(b.unary("stablehlo.ceil", g.bin_w), DType::S64);
  }
  return g;
}

// One sample coordinate per (roi, bin) along one axis: [K, P] for sample
// index i (0-d s64) of a grid of `grid` [K] samples per bin.
Value sample_coord(Builder& b, DType t, Value start, Value bin, Value grid, Value i, int64_t P) {
  int64_t K = start.shape()[0];
  Shape kp{K, P};
  Value p = b.convert(b.iota(Type{DType::S64, kp}, 1), t);
  Value half = b.add(b.convert(b.broadcast_in_dim(i, kp, {}), t), b.constant(0.5, t, kp));
  Value bk = b.broadcast_in_dim(bin, kp, {0});
  Value gk = b.convert(b.broadcast_in_dim(b.max(grid, b.constant_int(1, DType::S64, {K})), kp, {0}), t);
  return b.add(b.add(b.broadcast_in_dim(start, kp, {0}), b.mul(p, bk)), b.div(b.mul(half, bk), gk));
}

// The two taps of one axis: low/high integer positions [K, P] (s64) and their
// weights; `ok` [K, P] is false where the sample lies outside [-1, size].
struct AxisTaps {
  Value lo, hi, wlo, whi, ok;
};

AxisTaps axis_taps(Builder& b, DType t, Value x, int64_t size) {
  const Shape& s = x.shape();
  auto c = [&](double v) { return b.constant(v, t, s); };
  AxisTaps a;
  a.ok = b.and_(b.compare(x, c(-1), Cmp::GE), b.compare(x, c(static_cast<double>(size)), Cmp::LE));
  x = b.max(x, c(0));
  Value lo = b.convert(x, DType::S64);  // truncation, x >= 0
  Value last = b.constant_int(size - 1, DType::S64, s);
  Value at_end = b.compare(lo, last, Cmp::GE);
  lo = b.select(at_end, last, lo);
  a.lo = lo;
  a.hi = b.select(at_end, last, b.add(lo, b.constant_int(1, DType::S64, s)));
  x = b.select(at_end, b.convert(lo, t), x);
  Value l = b.sub(x, b.convert(lo, t));
  a.whi = l;
  a.wlo = b.sub(c(1), l);
  return a;
}

// The loop: state is {s (s64 sample number), acc, input or grad, rois-derived
// geometry..., total}; `step` adds one sample's contribution to acc.
using Step = std::function<Value(Builder&, Value acc, Value src, const Geometry& g, Value iy, Value ix)>;

Value sample_loop(Builder& b, const RoiAlign& r, const Geometry& g0, Value acc0, Value src, const Step& step) {
  Shape k{r.K};
  Value zero = b.constant_int(0, DType::S64);
  Value mh = b.max(reduce_max(b, g0.grid_h, {0}), zero), mw = b.max(reduce_max(b, g0.grid_w, {0}), zero);
  Value total = b.mul(mh, mw);
  Values init{zero, total, mw, acc0, src, g0.batch, g0.y0, g0.x0, g0.bin_h, g0.bin_w, g0.grid_h, g0.grid_w};
  Values out = b.while_loop(
      init, [](Builder& bb, const Values& st) { return Values{bb.compare(st[0], st[1], Cmp::LT)}; },
      [&step](Builder& bb, const Values& st) {
        Geometry g{st[5], st[6], st[7], st[8], st[9], st[10], st[11]};
        Value iy = bb.div(st[0], st[2]), ix = bb.binary("stablehlo.remainder", st[0], st[2]);
        Value acc = step(bb, st[3], st[4], g, iy, ix);
        Values next = st;
        next[0] = bb.add(st[0], bb.constant_int(1, DType::S64));
        next[3] = acc;
        return next;
      });
  return out[3];
}

// The four taps of sample (iy, ix) of every bin: gather/scatter indices
// [K, PH, PW, 3] (batch, y, x) and weights [K, PH, PW] (zero where the sample
// is outside, or beyond the ROI's own grid).
struct Taps {
  Values idx, w;
};

Taps taps(Builder& b, const RoiAlign& r, const Geometry& g, Value iy, Value ix) {
  Value y = sample_coord(b, r.t, g.y0, g.bin_h, g.grid_h, iy, r.PH);  // [K, PH]
  Value x = sample_coord(b, r.t, g.x0, g.bin_w, g.grid_w, ix, r.PW);  // [K, PW]
  AxisTaps ty = axis_taps(b, r.t, y, r.H), tx = axis_taps(b, r.t, x, r.W);
  Shape kpp{r.K, r.PH, r.PW}, k{r.K};
  Value in_grid = b.and_(b.compare(b.broadcast_in_dim(iy, k, {}), g.grid_h, Cmp::LT),
                         b.compare(b.broadcast_in_dim(ix, k, {}), g.grid_w, Cmp::LT));
  Value ok = b.and_(b.and_(b.broadcast_in_dim(ty.ok, kpp, {0, 1}), b.broadcast_in_dim(tx.ok, kpp, {0, 2})),
                    b.broadcast_in_dim(in_grid, kpp, {0}));
  Value zero = b.constant(0, r.t, kpp);
  Value bidx = b.reshape(b.broadcast_in_dim(b.clamp(b.constant_int(0, DType::S64, k), g.batch,
                                                    b.constant_int(r.N - 1, DType::S64, k)),
                                            kpp, {0}),
                         {r.K, r.PH, r.PW, 1});
  Taps out;
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      Value yi = b.broadcast_in_dim(a ? ty.hi : ty.lo, kpp, {0, 1});
      Value xi = b.broadcast_in_dim(c ? tx.hi : tx.lo, kpp, {0, 2});
      Value w = b.mul(b.broadcast_in_dim(a ? ty.whi : ty.wlo, kpp, {0, 1}),
                      b.broadcast_in_dim(c ? tx.whi : tx.wlo, kpp, {0, 2}));
      out.w.push_back(b.select(ok, w, zero));
      out.idx.push_back(
          b.concatenate({bidx, b.reshape(yi, {r.K, r.PH, r.PW, 1}), b.reshape(xi, {r.K, r.PH, r.PW, 1})}, 3));
    }
  return out;
}

// [K] count of samples per bin, max(grid_h * grid_w, 1), as the dtype.
Value sample_count(Builder& b, const RoiAlign& r, const Geometry& g) {
  Shape k{r.K};
  Value n = b.mul(g.grid_h, g.grid_w);
  if (!r.position_sensitive) n = b.max(n, b.constant_int(1, DType::S64, k));
  return b.convert(n, r.t);
}

hlo::Builder::GatherDims tap_gather_dims() {
  hlo::Builder::GatherDims dn;
  dn.offset_dims = {3};
  dn.collapsed_slice_dims = {0, 1, 2};
  dn.start_index_map = {0, 1, 2};
  dn.index_vector_dim = 3;
  return dn;
}

hlo::Builder::ScatterDims tap_scatter_dims() {
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = {3};
  dn.inserted_window_dims = {0, 1, 2};
  dn.scatter_dims_to_operand_dims = {0, 1, 2};
  dn.index_vector_dim = 3;
  return dn;
}

hlo::Body add_body(DType t) {
  return [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; };
}

void check_dtype(DType t, const char* op) {
  if (t != DType::F32 && t != DType::F64 && t != DType::F16)
    throw NotImplementedForDtype(std::string(op) + " not implemented for this dtype on the CPU");
}

// roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)
Values roi_align(Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), rois = a[1].value();
  check_rois(rois);
  if (x.rank() != 4) throw InvalidArgument("roi_align: input must be 4-D [N, C, H, W]");
  RoiAlign r{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], rois.shape()[0], a[3].i, a[4].i,
             a[2].d,        a[5].i,       a[6].b,       x.dtype()};
  check_dtype(r.t, "roi_align");
  Shape out{r.K, r.C, r.PH, r.PW};
  if (numel(out) == 0 || x.type.numel() == 0) return {full(b, 0, r.t, out)};
  rois = b.convert(rois, r.t);
  Geometry g = geometry(b, r, rois);
  Shape kppc{r.K, r.PH, r.PW, r.C};
  Value xt = b.transpose(x, {0, 2, 3, 1});  // [N, H, W, C]
  Value acc = sample_loop(b, r, g, full(b, 0, r.t, kppc), xt,
                          [r](Builder& bb, Value acc, Value src, const Geometry& g, Value iy, Value ix) {
                            Taps tp = taps(bb, r, g, iy, ix);
                            for (size_t j = 0; j < 4; ++j) {
                              Value v = bb.gather(src, tp.idx[j], tap_gather_dims(), {1, 1, 1, r.C},
                                                  {r.K, r.PH, r.PW, r.C});
                              acc = bb.add(acc, bb.mul(v, bb.broadcast_in_dim(tp.w[j], {r.K, r.PH, r.PW, r.C},
                                                                              {0, 1, 2})));
                            }
                            return acc;
                          });
  Value cnt = b.broadcast_in_dim(sample_count(b, r, g), kppc, {0});
  return {b.transpose(b.div(acc, cnt), {0, 3, 1, 2})};
}

// _roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width,
//                     batch_size, channels, height, width, sampling_ratio, aligned)
Values roi_align_backward(Builder& b, const Args& a, const Context& c) {
  Value grad = a[0].value(), rois = a[1].value();
  check_rois(rois);
  RoiAlign r{a[5].i, a[6].i, a[7].i, a[8].i, rois.shape()[0], a[3].i, a[4].i, a[2].d, a[9].i, a[10].b,
             grad.dtype()};
  check_dtype(r.t, "roi_align_backward");
  Shape in_shape{r.N, r.C, r.H, r.W};
  if (numel(in_shape) == 0 || grad.type.numel() == 0) return {full(b, 0, r.t, in_shape)};
  rois = b.convert(rois, r.t);
  Geometry g = geometry(b, r, rois);
  Shape kppc{r.K, r.PH, r.PW, r.C};
  // The gradient per sample: grad / count, channels last.
  Value gs = b.div(b.transpose(grad, {0, 2, 3, 1}), b.broadcast_in_dim(sample_count(b, r, g), kppc, {0}));
  Value acc = sample_loop(b, r, g, full(b, 0, r.t, {r.N, r.H, r.W, r.C}), gs,
                          [r](Builder& bb, Value acc, Value src, const Geometry& g, Value iy, Value ix) {
                            Taps tp = taps(bb, r, g, iy, ix);
                            for (size_t j = 0; j < 4; ++j) {
                              Value u = bb.mul(src, bb.broadcast_in_dim(tp.w[j], {r.K, r.PH, r.PW, r.C}, {0, 1, 2}));
                              acc = bb.scatter(acc, tp.idx[j], u, tap_scatter_dims(), add_body(r.t));
                            }
                            return acc;
                          });
  return {b.transpose(acc, {0, 3, 1, 2})};
}

// Position-sensitive taps: gather/scatter indices [K, C_out, PH, PW, 4]
// (batch, input channel, y, x) into [N, C, H, W] and weights [K, C_out, PH, PW].
Taps ps_taps(Builder& b, const RoiAlign& r, const Taps& tp) {
  Shape kcpp{r.K, r.C_out, r.PH, r.PW}, kcpp1{r.K, r.C_out, r.PH, r.PW, 1};
  Value cin = b.add(b.mul(b.add(b.mul(b.iota(Type{DType::S64, kcpp}, 1), b.constant_int(r.PH, DType::S64, kcpp)),
                                b.iota(Type{DType::S64, kcpp}, 2)),
                          b.constant_int(r.PW, DType::S64, kcpp)),
                    b.iota(Type{DType::S64, kcpp}, 3));
  Taps out;
  for (size_t j = 0; j < tp.idx.size(); ++j) {
    Value idx = b.broadcast_in_dim(tp.idx[j], {r.K, r.C_out, r.PH, r.PW, 3}, {0, 2, 3, 4});
    Value bi = b.slice(idx, {0, 0, 0, 0, 0}, {r.K, r.C_out, r.PH, r.PW, 1});
    Value yx = b.slice(idx, {0, 0, 0, 0, 1}, {r.K, r.C_out, r.PH, r.PW, 3});
    out.idx.push_back(b.concatenate({bi, b.reshape(cin, kcpp1), yx}, 4));
    out.w.push_back(b.broadcast_in_dim(tp.w[j], kcpp, {0, 2, 3}));
  }
  return out;
}

hlo::Builder::GatherDims point_gather_dims() {
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0, 1, 2, 3};
  dn.start_index_map = {0, 1, 2, 3};
  dn.index_vector_dim = 4;
  return dn;
}

hlo::Builder::ScatterDims point_scatter_dims() {
  hlo::Builder::ScatterDims dn;
  dn.inserted_window_dims = {0, 1, 2, 3};
  dn.scatter_dims_to_operand_dims = {0, 1, 2, 3};
  dn.index_vector_dim = 4;
  return dn;
}

RoiAlign ps_setup(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t PH, int64_t PW, double scale,
                  int64_t sampling_ratio, DType t) {
  if (PH <= 0 || PW <= 0 || C % (PH * PW) != 0)
    throw InvalidArgument("input channels must be a multiple of pooling height * pooling width");
  RoiAlign r{N, C, H, W, K, PH, PW, scale, sampling_ratio, true, t};
  r.position_sensitive = true;
  r.C_out = C / (PH * PW);
  return r;
}

// ps_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio)
//   -> (output, channel_mapping)
Values ps_roi_align(Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), rois = a[1].value();
  check_rois(rois);
  if (x.rank() != 4) throw InvalidArgument("ps_roi_align: input must be 4-D [N, C, H, W]");
  RoiAlign r = ps_setup(x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], rois.shape()[0], a[3].i, a[4].i,
                        a[2].d, a[5].i, x.dtype());
  check_dtype(r.t, "ps_roi_align");
  Shape out{r.K, r.C_out, r.PH, r.PW};
  Value mapping = b.add(b.mul(b.add(b.mul(b.iota(Type{DType::S64, out}, 1), b.constant_int(r.PH, DType::S64, out)),
                                    b.iota(Type{DType::S64, out}, 2)),
                              b.constant_int(r.PW, DType::S64, out)),
                        b.iota(Type{DType::S64, out}, 3));
  mapping = b.convert(mapping, DType::S32);  // torchvision's channel_mapping is int32
  if (numel(out) == 0 || x.type.numel() == 0) return {full(b, 0, r.t, out), mapping};
  rois = b.convert(rois, r.t);
  Geometry g = geometry(b, r, rois);
  Value acc = sample_loop(b, r, g, full(b, 0, r.t, out), x,
                          [r](Builder& bb, Value acc, Value src, const Geometry& g, Value iy, Value ix) {
                            Taps tp = ps_taps(bb, r, taps(bb, r, g, iy, ix));
                            Shape o{r.K, r.C_out, r.PH, r.PW};
                            for (size_t j = 0; j < 4; ++j)
                              acc = bb.add(acc, bb.mul(bb.gather(src, tp.idx[j], point_gather_dims(), {1, 1, 1, 1}, o),
                                                       tp.w[j]));
                            return acc;
                          });
  return {b.div(acc, b.broadcast_in_dim(sample_count(b, r, g), out, {0})), mapping};
}

// _ps_roi_align_backward(grad, rois, channel_mapping, spatial_scale, pooled_height,
//   pooled_width, sampling_ratio, batch_size, channels, height, width)
Values ps_roi_align_backward(Builder& b, const Args& a, const Context& c) {
  Value grad = a[0].value(), rois = a[1].value();
  check_rois(rois);
  RoiAlign r = ps_setup(a[7].i, a[8].i, a[9].i, a[10].i, rois.shape()[0], a[4].i, a[5].i, a[3].d, a[6].i,
                        grad.dtype());
  check_dtype(r.t, "ps_roi_align_backward");
  Shape in_shape{r.N, r.C, r.H, r.W}, out{r.K, r.C_out, r.PH, r.PW};
  if (numel(in_shape) == 0 || grad.type.numel() == 0) return {full(b, 0, r.t, in_shape)};
  rois = b.convert(rois, r.t);
  Geometry g = geometry(b, r, rois);
  Value gs = b.div(grad, b.broadcast_in_dim(sample_count(b, r, g), out, {0}));
  Value acc = sample_loop(b, r, g, full(b, 0, r.t, in_shape), gs,
                          [r](Builder& bb, Value acc, Value src, const Geometry& g, Value iy, Value ix) {
                            Taps tp = ps_taps(bb, r, taps(bb, r, g, iy, ix));
                            for (size_t j = 0; j < 4; ++j)
                              acc = bb.scatter(acc, tp.idx[j], bb.mul(src, tp.w[j]), point_scatter_dims(),
                                               add_body(r.t));
                            return acc;
                          });
  return {acc};
}

TT_RULE({"torchvision::roi_align"}, roi_align);
TT_RULE({"torchvision::_roi_align_backward"}, roi_align_backward);
TT_RULE({"torchvision::ps_roi_align"}, ps_roi_align);
TT_RULE({"torchvision::_ps_roi_align_backward"}, ps_roi_align_backward);

}  // namespace
}  // namespace tt::lowering
