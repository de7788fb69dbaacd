// torchvision::roi_pool (max over each bin, with the argmax),
// torchvision::_roi_pool_backward (the gradient scattered to the argmax),
// and the position-sensitive ps_roi_pool (average) with its backward.
//
// A bin covers input rows [hstart, hend) and columns [wstart, wend), bounds
// from the rounded, scaled ROI as in torchvision's CPU kernel
// (roi_pool_kernel.cpp). Bin extents depend on the boxes, so a while loop
// visits window offsets (dh, dw) up to the largest extent of any bin,
// computed on the device; each step gathers one input point per bin and
// keeps it where it is inside its bin and strictly greater than the maximum
// so far (the first maximum in row-major order wins, as on the CPU). An
// empty bin gives 0 with argmax -1.
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

struct RoiPool {
  int64_t N, C, H, W, K, PH, PW;
  double scale;
  DType t;
};

void check_rois(const Value& rois) {
  if (rois.rank() != 2 || rois.shape()[1] != 5) throw InvalidArgument("rois must have shape as Tensor[K, 5]");
}

// Per (roi, bin) bounds along one axis: start and end [K, P] (s64).
struct Bounds {
  Value start, end;
};

// `plus_one`: roi_pool counts the rounded ROI's end pixel (ps_roi_pool does
// not); bounds are clipped into [0, top]. `round_in_float32`: the scaled
// corner is rounded as a float32 (ps_roi_pool's CPU backward calls roundf
// whatever the dtype).
Bounds bin_bounds(Builder& b, const RoiPool& r, Value lo_coord, Value hi_coord, int64_t P, int64_t top,
                  bool plus_one = true, bool round_in_float32 = false) {
  const int64_t K = r.K;
  Shape k{K}, kp{K, P};
  auto scaled = [&](Value v) {
    Value x = b.mul(v, b.constant(r.scale, r.t, k));
    if (round_in_float32) x = b.convert(x, DType::F32);
    return b.convert(b.unary("stablehlo.round_nearest_afz", x), DType::S64);
  };
  Value s = scaled(lo_coord), e = scaled(hi_coord);
  Value len = b.sub(e, s);
  if (plus_one) len = b.add(len, b.constant_int(1, DType::S64, k));
  len = b.max(len, b.constant_int(1, DType::S64, k));
  // XLA turns a division by a constant or a broadcast into a multiplication
  // by its reciprocal, which can round the bin size one ulp away from the
  // CPU kernel's (and floor/ceil of a bound then moves by a pixel). The
  // divisor is therefore a per-ROI value, max(P, min(len, P)) == P, that XLA
  // cannot fold, so the quotient is correctly rounded.
  Value p_const = b.constant_int(P, DType::S64, k);
  Value divisor = b.max(p_const, b.min(len, p_const));
  Value bin = b.div(b.convert(len, r.t), b.convert(divisor, r.t));  // [K]
  Value p = b.convert(b.iota(Type{DType::S64, kp}, 1), r.t);
  Value binp = b.broadcast_in_dim(bin, kp, {0});
  Value start = b.convert(b.unary("stablehlo.floor", b.mul(p, binp)), DType::S64);
  Value end = b.convert(b.unary("stablehlo.ceil", b.mul(b.add(p, b.constant(1, r.t, kp)), binp)), DType::S64);
  Value off = b.broadcast_in_dim(s, kp, {0});
  Value zero = b.constant_int(0, DType::S64, kp), hi = b.constant_int(top, DType::S64, kp);
  return {b.clamp(zero, b.add(start, off), hi), b.clamp(zero, b.add(end, off), hi)};
}

Value column(Builder& b, Value rois, int64_t j) {
  int64_t K = rois.shape()[0];
  return b.reshape(b.slice(rois, {0, j}, {K, j + 1}), {K});
}

// roi_pool(input, rois, spatial_scale, pooled_height, pooled_width) -> (output, argmax)
Values roi_pool(Builder& b, const Args& a, const Context&) {
  Value x = a[0].value(), rois = a[1].value();
  check_rois(rois);
  if (x.rank() != 4) throw InvalidArgument("roi_pool: input must be 4-D [N, C, H, W]");
  RoiPool r{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], rois.shape()[0], a[3].i, a[4].i, a[2].d,
            x.dtype()};
  if (!hlo::is_float(r.t)) throw NotImplementedForDtype("roi_pool not implemented for an integer dtype");
  Shape out{r.K, r.C, r.PH, r.PW};
  if (numel(out) == 0 || x.type.numel() == 0)
    return {full(b, 0, r.t, out), full(b, -1, DType::S32, out)};
  rois = b.convert(rois, r.t);
  Bounds hb = bin_bounds(b, r, column(b, rois, 2), column(b, rois, 4), r.PH, r.H);
  Bounds wb = bin_bounds(b, r, column(b, rois, 1), column(b, rois, 3), r.PW, r.W);
  Shape k{r.K};
  Value batch = b.clamp(b.constant_int(0, DType::S64, k), b.convert(column(b, rois, 0), DType::S64),
                        b.constant_int(r.N - 1, DType::S64, k));
  Value zero = b.constant_int(0, DType::S64);
  Value mh = b.max(reduce_max(b, b.sub(hb.end, hb.start), {0, 1}), zero);
  Value mw = b.max(reduce_max(b, b.sub(wb.end, wb.start), {0, 1}), zero);
  Shape kppc{r.K, r.PH, r.PW, r.C};
  // The CPU kernel starts a non-empty bin at -FLT_MAX whatever the dtype.
  Value lowest = b.constant(-std::numeric_limits<float>::max(), r.t, kppc);
  Value xt = b.transpose(x, {0, 2, 3, 1});  // [N, H, W, C]
  const RoiPool rr = r;
  Values out_state = b.while_loop(
      {zero, b.mul(mh, mw), mw, lowest, b.constant_int(-1, DType::S64, kppc), xt, hb.start, hb.end, wb.start, wb.end,
       batch},
      [](Builder& bb, const Values& st) { return Values{bb.compare(st[0], st[1], Cmp::LT)}; },
      [rr](Builder& bb, const Values& st) {
        const RoiPool& r = rr;
        Shape kpp{r.K, r.PH, r.PW}, kppc{r.K, r.PH, r.PW, r.C};
        Value dh = bb.div(st[0], st[2]), dw = bb.binary("stablehlo.remainder", st[0], st[2]);
        Value h = bb.add(st[6], bb.broadcast_in_dim(dh, {r.K, r.PH}, {}));  // [K, PH]
        Value w = bb.add(st[8], bb.broadcast_in_dim(dw, {r.K, r.PW}, {}));  // [K, PW]
        Value hk = bb.broadcast_in_dim(h, kpp, {0, 1}), wk = bb.broadcast_in_dim(w, kpp, {0, 2});
        Value inside = bb.and_(bb.compare(hk, bb.broadcast_in_dim(st[7], kpp, {0, 1}), Cmp::LT),
                               bb.compare(wk, bb.broadcast_in_dim(st[9], kpp, {0, 2}), Cmp::LT));
        auto clampi = [&](Value v, int64_t hi) {
          return bb.clamp(bb.constant_int(0, DType::S64, kpp), v, bb.constant_int(hi - 1, DType::S64, kpp));
        };
        Shape kpp1{r.K, r.PH, r.PW, 1};
        Value idx = bb.concatenate({bb.reshape(bb.broadcast_in_dim(st[10], kpp, {0}), kpp1),
                                    bb.reshape(clampi(hk, r.H), kpp1), bb.reshape(clampi(wk, r.W), kpp1)},
                                   3);
        hlo::Builder::GatherDims dn;
        dn.offset_dims = {3};
        dn.collapsed_slice_dims = {0, 1, 2};
        dn.start_index_map = {0, 1, 2};
        dn.index_vector_dim = 3;
        Value v = bb.gather(st[5], idx, dn, {1, 1, 1, r.C}, kppc);
        Value take = bb.and_(bb.broadcast_in_dim(inside, kppc, {0, 1, 2}), bb.compare(v, st[3], Cmp::GT));
        Value flat = bb.broadcast_in_dim(bb.add(bb.mul(hk, bb.constant_int(r.W, DType::S64, kpp)), wk), kppc,
                                         {0, 1, 2});
        Values next = st;
        next[0] = bb.add(st[0], bb.constant_int(1, DType::S64));
        next[3] = bb.select(take, v, st[3]);
        next[4] = bb.select(take, flat, st[4]);
        return next;
      });
  Value arg = out_state[4];
  Shape kpp{r.K, r.PH, r.PW};
  Value empty = b.or_(b.compare(b.broadcast_in_dim(hb.end, kpp, {0, 1}), b.broadcast_in_dim(hb.start, kpp, {0, 1}),
                                Cmp::LE),
                      b.compare(b.broadcast_in_dim(wb.end, kpp, {0, 2}), b.broadcast_in_dim(wb.start, kpp, {0, 2}),
                                Cmp::LE));
  Value val = b.select(b.broadcast_in_dim(empty, kppc, {0, 1, 2}), full(b, 0, r.t, kppc), out_state[3]);
  // torchvision's argmax is int32 (a flat index into one H x W plane).
  return {b.transpose(val, {0, 3, 1, 2}), b.convert(b.transpose(arg, {0, 3, 1, 2}), DType::S32)};
}

// _roi_pool_backward(grad, rois, argmax, spatial_scale, pooled_height,
//                    pooled_width, batch_size, channels, height, width)
Values roi_pool_backward(Builder& b, const Args& a, const Context&) {
  Value grad = a[0].value(), rois = a[1].value(), arg = b.convert(a[2].value(), DType::S64);
  check_rois(rois);
  const int64_t N = a[6].i, C = a[7].i, H = a[8].i, W = a[9].i, K = rois.shape()[0];
  const int64_t PH = a[4].i, PW = a[5].i;
  const DType t = grad.dtype();
  Shape in_shape{N, C, H, W};
  if (numel(in_shape) == 0 || grad.type.numel() == 0) return {full(b, 0, t, in_shape)};
  Shape kcpp{K, C, PH, PW}, kcpp1{K, C, PH, PW, 1};
  Value valid = b.compare(arg, b.constant_int(-1, DType::S64, kcpp), Cmp::NE);
  Value batch = b.clamp(b.constant_int(0, DType::S64, {K}), b.convert(column(b, b.convert(rois, t), 0), DType::S64),
                        b.constant_int(N - 1, DType::S64, {K}));
  Value idx = b.concatenate({b.reshape(b.broadcast_in_dim(batch, kcpp, {0}), kcpp1),
                             b.reshape(b.iota(Type{DType::S64, kcpp}, 1), kcpp1),
                             b.reshape(b.max(arg, b.constant_int(0, DType::S64, kcpp)), kcpp1)},
                            4);
  Value upd = b.select(valid, grad, full(b, 0, t, kcpp));
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = {};
  dn.inserted_window_dims = {0, 1, 2};
  dn.scatter_dims_to_operand_dims = {0, 1, 2};
  dn.index_vector_dim = 4;
  Value acc = b.scatter(full(b, 0, t, {N, C, H * W}), idx, upd, dn,
                        [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; });
  return {b.reshape(acc, in_shape)};
}

// ps_roi_pool: the average over each bin of input channel
// (c * PH + ph) * PW + pw for output channel c. torchvision's CPU kernel
// clips the forward's bin bounds to size - 1 and the backward's to size
// (ps_roi_pool_kernel.cpp); both are followed here.
struct PsPool {
  RoiPool r;
  int64_t C_out;
};

PsPool ps_setup(RoiPool r) {
  if (r.PH <= 0 || r.PW <= 0 || r.C % (r.PH * r.PW) != 0)
    throw InvalidArgument("input channels must be a multiple of pooling height * pooling width");
  return {r, r.C / (r.PH * r.PW)};
}

Value default_mapping(Builder& b, const Shape& out, int64_t PH, int64_t PW) {
  auto io = [&](int64_t d) { return b.iota(Type{DType::S64, out}, d); };
  auto k = [&](int64_t v) { return b.constant_int(v, DType::S64, out); };
  return b.add(b.mul(b.add(b.mul(io(1), k(PH)), io(2)), k(PW)), io(3));
}

// The while loop over window offsets shared by forward and backward:
// state {s, total, mw, acc, src, hstart, hend, wstart, wend, batch, cin};
// `step` gets (acc, src, point indices [K, C_out, PH, PW, 4], inside).
using PsStep = std::function<Value(Builder&, Value acc, Value src, Value idx, Value inside)>;

Value ps_window_loop(Builder& b, const PsPool& p, const Bounds& hb, const Bounds& wb, Value batch, Value cin,
                     Value acc0, Value src, const PsStep& step) {
  Value zero = b.constant_int(0, DType::S64);
  Value mh = b.max(reduce_max(b, b.sub(hb.end, hb.start), {0, 1}), zero);
  Value mw = b.max(reduce_max(b, b.sub(wb.end, wb.start), {0, 1}), zero);
  const PsPool pp = p;
  Values out = b.while_loop(
      {zero, b.mul(mh, mw), mw, acc0, src, hb.start, hb.end, wb.start, wb.end, batch, cin},
      [](Builder& bb, const Values& st) { return Values{bb.compare(st[0], st[1], Cmp::LT)}; },
      [pp, step](Builder& bb, const Values& st) {
        const RoiPool& r = pp.r;
        Shape o{r.K, pp.C_out, r.PH, r.PW}, o1{r.K, pp.C_out, r.PH, r.PW, 1};
        Value dh = bb.div(st[0], st[2]), dw = bb.binary("stablehlo.remainder", st[0], st[2]);
        Value h = bb.broadcast_in_dim(bb.add(st[5], bb.broadcast_in_dim(dh, {r.K, r.PH}, {})), o, {0, 2});
        Value w = bb.broadcast_in_dim(bb.add(st[7], bb.broadcast_in_dim(dw, {r.K, r.PW}, {})), o, {0, 3});
        Value inside = bb.and_(bb.compare(h, bb.broadcast_in_dim(st[6], o, {0, 2}), Cmp::LT),
                               bb.compare(w, bb.broadcast_in_dim(st[8], o, {0, 3}), Cmp::LT));
        auto clampi = [&](Value v, int64_t hi) {
          return bb.clamp(bb.constant_int(0, DType::S64, o), v, bb.constant_int(hi - 1, DType::S64, o));
        };
        Value idx = bb.concatenate({bb.reshape(bb.broadcast_in_dim(st[9], o, {0}), o1),
                                    bb.reshape(clampi(st[10], r.C), o1), bb.reshape(clampi(h, r.H), o1),
                                    bb.reshape(clampi(w, r.W), o1)},
                                   4);
        Values next = st;
        next[0] = bb.add(st[0], bb.constant_int(1, DType::S64));
        next[3] = step(bb, st[3], st[4], idx, inside);
        return next;
      });
  return out[3];
}

// A window step's points: idx [K, C_out, PH, PW, 4] holds the (batch,
// channel, row, column) of one point of a [N, C, H, W] tensor per output.
Value read_points(Builder& b, Value src, Value idx, const Shape& out) {
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = dn.start_index_map = {0, 1, 2, 3};
  dn.index_vector_dim = 4;
  return b.gather(src, idx, dn, {1, 1, 1, 1}, out);
}

Value add_to_points(Builder& b, Value acc, Value idx, Value updates) {
  hlo::Builder::ScatterDims dn;
  dn.inserted_window_dims = dn.scatter_dims_to_operand_dims = {0, 1, 2, 3};
  dn.index_vector_dim = 4;
  return b.scatter(acc, idx, updates, dn, [](Builder& b2, const Values& v) { return Values{b2.add(v[0], v[1])}; });
}

// v where the point is inside its bin, else 0.
Value zero_outside(Builder& b, Value inside, Value v) {
  return b.select(inside, v, full(b, 0, v.dtype(), v.shape()));
}

// [K, C_out, PH, PW]: whether each bin is empty, and its area as the dtype.
std::pair<Value, Value> bin_area(Builder& b, const PsPool& p, const Bounds& hb, const Bounds& wb) {
  const RoiPool& r = p.r;
  Shape o{r.K, p.C_out, r.PH, r.PW};
  Value dh = b.broadcast_in_dim(b.sub(hb.end, hb.start), o, {0, 2});
  Value dw = b.broadcast_in_dim(b.sub(wb.end, wb.start), o, {0, 3});
  Value zero = b.constant_int(0, DType::S64, o);
  Value empty = b.or_(b.compare(dh, zero, Cmp::LE), b.compare(dw, zero, Cmp::LE));
  return {empty, b.convert(b.mul(dh, dw), r.t)};
}

Value batch_index(Builder& b, const RoiPool& r, Value rois) {
  Shape k{r.K};
  return b.clamp(b.constant_int(0, DType::S64, k), b.convert(column(b, rois, 0), DType::S64),
                 b.constant_int(r.N - 1, DType::S64, k));
}

// Row and column bin bounds of ps_roi_pool's forward or backward (clipped as
// above); the CPU backward also rounds the scaled corners as float32.
std::pair<Bounds, Bounds> ps_bounds(Builder& b, const RoiPool& r, Value rois, bool backward) {
  const int64_t clip = backward ? 0 : 1;
  return {bin_bounds(b, r, column(b, rois, 2), column(b, rois, 4), r.PH, r.H - clip, false, backward),
          bin_bounds(b, r, column(b, rois, 1), column(b, rois, 3), r.PW, r.W - clip, false, backward)};
}

// ps_roi_pool(input, rois, spatial_scale, pooled_height, pooled_width) -> (output, channel_mapping)
Values ps_roi_pool(Builder& b, const Args& a, const Context&) {
  Value x = a[0].value(), rois = a[1].value();
  check_rois(rois);
  if (x.rank() != 4) throw InvalidArgument("ps_roi_pool: input must be 4-D [N, C, H, W]");
  PsPool p = ps_setup(RoiPool{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], rois.shape()[0], a[3].i,
                              a[4].i, a[2].d, x.dtype()});
  const RoiPool& r = p.r;
  if (!hlo::is_float(r.t)) throw NotImplementedForDtype("ps_roi_pool only supports float and double types");
  Shape out{r.K, p.C_out, r.PH, r.PW};
  Value cin = default_mapping(b, out, r.PH, r.PW);
  Value mapping = b.convert(cin, DType::S32);
  if (numel(out) == 0 || x.type.numel() == 0) return {full(b, 0, r.t, out), mapping};
  rois = b.convert(rois, r.t);
  auto [hb, wb] = ps_bounds(b, r, rois, false);
  Value sum = ps_window_loop(b, p, hb, wb, batch_index(b, r, rois), cin, full(b, 0, r.t, out), x,
                             [out](Builder& bb, Value acc, Value src, Value idx, Value inside) {
                               return bb.add(acc, zero_outside(bb, inside, read_points(bb, src, idx, out)));
                             });
  auto [empty, area] = bin_area(b, p, hb, wb);
  return {b.select(empty, full(b, 0, r.t, out), b.div(sum, area)), mapping};
}

// _ps_roi_pool_backward(grad, rois, channel_mapping, spatial_scale, pooled_height,
//   pooled_width, batch_size, channels, height, width)
Values ps_roi_pool_backward(Builder& b, const Args& a, const Context&) {
  Value grad = a[0].value(), rois = a[1].value();
  check_rois(rois);
  PsPool p = ps_setup(RoiPool{a[6].i, a[7].i, a[8].i, a[9].i, rois.shape()[0], a[4].i, a[5].i, a[3].d, grad.dtype()});
  const RoiPool& r = p.r;
  Shape in_shape{r.N, r.C, r.H, r.W}, out{r.K, p.C_out, r.PH, r.PW};
  if (numel(in_shape) == 0 || grad.type.numel() == 0) return {full(b, 0, r.t, in_shape)};
  rois = b.convert(rois, r.t);
  auto [hb, wb] = ps_bounds(b, r, rois, true);
  auto [empty, area] = bin_area(b, p, hb, wb);
  Value diff = b.select(empty, full(b, 0, r.t, out), b.div(grad, area));
  Value cin = b.convert(a[2].value(), DType::S64);
  Value acc = ps_window_loop(b, p, hb, wb, batch_index(b, r, rois), cin, full(b, 0, r.t, in_shape), diff,
                             [](Builder& bb, Value acc, Value src, Value idx, Value inside) {
                               return add_to_points(bb, acc, idx, zero_outside(bb, inside, src));
                             });
  return {acc};
}

TT_RULE({"torchvision::roi_pool"}, roi_pool);
TT_RULE({"torchvision::_roi_pool_backward"}, roi_pool_backward);
TT_RULE({"torchvision::ps_roi_pool"}, ps_roi_pool);
TT_RULE({"torchvision::_ps_roi_pool_backward"}, ps_roi_pool_backward);

}  // namespace
}  // namespace tt::lowering
