// torchvision::deform_conv2d and torchvision::_deform_conv2d_backward.
//
// Every kernel tap k of every output position reads the input at its
// regular position plus a learned offset (offset [N, OG * 2 * KK, Ho, Wo],
// y then x per tap, one set per offset group), by bilinear interpolation
// with taps outside the input reading zero, times a mask (mask [N, OG * KK,
// Ho, Wo]) when use_mask. The sampled columns [N, OG, KK, Ho, Wo, C/OG] come
// from four gathers (channels last, one slice per point); the output is the
// grouped product of the weight with the columns plus the bias.
//
// The backward differentiates that directly: the columns' gradient is the
// weight's transpose times grad; the input's gradient scatter-adds it through
// the same four taps; the offsets' gradient is the columns' gradient times
// the bilinear value's derivative in y or x (torchvision's
// get_coordinate_weight); the mask's, times the sampled value.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

struct Deform {
  int64_t N, C, H, W, Cout, KH, KW, Ho, Wo, G, OG;
  int64_t sh, sw, ph, pw, dh, dw;
  bool use_mask;
  DType t;
  int64_t KK() const { return KH * KW; }
  int64_t cpg() const { return C / OG; }  // channels per offset group
};

Deform setup(const Value& x, const Value& weight, const Value& offset, const Args& a, size_t first_int) {
  if (x.rank() != 4 || weight.rank() != 4 || offset.rank() != 4)
    throw InvalidArgument("deform_conv2d: input, weight and offset must be 4-D");
  Deform d{};
  d.N = x.shape()[0], d.C = x.shape()[1], d.H = x.shape()[2], d.W = x.shape()[3];
  d.Cout = weight.shape()[0], d.KH = weight.shape()[2], d.KW = weight.shape()[3];
  const Arg* p = &a[first_int];
  d.sh = p[0].i, d.sw = p[1].i, d.ph = p[2].i, d.pw = p[3].i, d.dh = p[4].i, d.dw = p[5].i;
  d.G = p[6].i, d.OG = p[7].i, d.use_mask = p[8].b;
  d.t = x.dtype();
  if (d.sh <= 0 || d.sw <= 0 || d.dh <= 0 || d.dw <= 0 || d.G <= 0 || d.OG <= 0)
    throw InvalidArgument("deform_conv2d: stride, dilation and group counts must be positive");
  if (d.C % d.OG != 0 || d.C % d.G != 0 || d.Cout % d.G != 0 || weight.shape()[1] * d.G != d.C)
    throw InvalidArgument("deform_conv2d: channels do not divide into the groups");
  d.Ho = (d.H + 2 * d.ph - (d.dh * (d.KH - 1) + 1)) / d.sh + 1;
  d.Wo = (d.W + 2 * d.pw - (d.dw * (d.KW - 1) + 1)) / d.sw + 1;
  if (offset.shape()[1] != d.OG * 2 * d.KK() || offset.shape()[2] != d.Ho || offset.shape()[3] != d.Wo)
    throw InvalidArgument("offset has the wrong shape for the kernel, groups and output size");
  if (!hlo::is_float(d.t)) throw NotImplementedForDtype("deform_conv2d not implemented for an integer dtype");
  return d;
}

// One tap of the bilinear sample: indices [N, OG, KK, Ho, Wo, 4] (n, og, y, x)
// clamped into range, its weight (zero where the tap is outside), and the
// weight's derivatives in y and x.
struct Tap {
  Value idx, w, wy, wx;
};

struct Sample {
  std::vector<Tap> taps;
};

Sample sample(Builder& b, const Deform& d, Value offset) {
  Shape s{d.N, d.OG, d.KK(), d.Ho, d.Wo};
  Value off = b.reshape(offset, {d.N, d.OG, d.KK(), 2, d.Ho, d.Wo});
  auto part = [&](int64_t j) {
    return b.reshape(b.slice(off, {0, 0, 0, j, 0, 0}, {d.N, d.OG, d.KK(), j + 1, d.Ho, d.Wo}), s);
  };
  auto k = [&](double v) { return b.constant(v, d.t, s); };
  auto io = [&](int64_t dim) { return b.iota(Type{DType::S64, s}, dim); };
  auto ik = [&](int64_t v) { return b.constant_int(v, DType::S64, s); };
  Value kk = io(2);
  Value i = b.div(kk, ik(d.KW)), j = b.binary("stablehlo.remainder", kk, ik(d.KW));
  // (out_y * stride - pad) + i * dilation, in integers, then + offset.
  Value base_y = b.add(b.sub(b.mul(io(3), ik(d.sh)), ik(d.ph)), b.mul(i, ik(d.dh)));
  Value base_x = b.add(b.sub(b.mul(io(4), ik(d.sw)), ik(d.pw)), b.mul(j, ik(d.dw)));
  Value y = b.add(b.convert(base_y, d.t), part(0)), x = b.add(b.convert(base_x, d.t), part(1));
  Value yl = b.unary("stablehlo.floor", y), xl = b.unary("stablehlo.floor", x);
  Value ly = b.sub(y, yl), lx = b.sub(x, xl), hy = b.sub(k(1), ly), hx = b.sub(k(1), lx);
  Value yli = b.convert(yl, DType::S64), xli = b.convert(xl, DType::S64);
  Value n = io(0), og = io(1);
  Shape s1{d.N, d.OG, d.KK(), d.Ho, d.Wo, 1};
  Sample out;
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      Value yi = a ? b.add(yli, ik(1)) : yli, xi = c ? b.add(xli, ik(1)) : xli;
      Value ok = b.and_(b.and_(b.compare(yi, ik(0), Cmp::GE), b.compare(yi, ik(d.H), Cmp::LT)),
                        b.and_(b.compare(xi, ik(0), Cmp::GE), b.compare(xi, ik(d.W), Cmp::LT)));
      Value wy = a ? ly : hy, wx = c ? lx : hx;
      Tap tp;
      tp.w = b.select(ok, b.mul(wy, wx), k(0));
      // d(wy * wx)/dy = (+-1) * wx, d/dx = wy * (+-1).
      tp.wy = b.select(ok, a ? wx : b.neg(wx), k(0));
      tp.wx = b.select(ok, c ? wy : b.neg(wy), k(0));
      Value yc = b.clamp(ik(0), yi, ik(d.H - 1)), xc = b.clamp(ik(0), xi, ik(d.W - 1));
      tp.idx = b.concatenate({b.reshape(n, s1), b.reshape(og, s1), b.reshape(yc, s1), b.reshape(xc, s1)}, 5);
      out.taps.push_back(tp);
    }
  return out;
}

// Input [N, C, H, W] -> [N, OG, H, W, cpg], the gather operand.
Value grouped_channels_last(Builder& b, const Deform& d, Value x) {
  return b.transpose(b.reshape(x, {d.N, d.OG, d.cpg(), d.H, d.W}), {0, 1, 3, 4, 2});
}

Value gather_tap(Builder& b, const Deform& d, Value xg, const Tap& tp) {
  hlo::Builder::GatherDims dn;
  dn.offset_dims = {5};
  dn.collapsed_slice_dims = {0, 1, 2, 3};
  dn.start_index_map = {0, 1, 2, 3};
  dn.index_vector_dim = 5;
  return b.gather(xg, tp.idx, dn, {1, 1, 1, 1, d.cpg()}, {d.N, d.OG, d.KK(), d.Ho, d.Wo, d.cpg()});
}

Shape col_shape(const Deform& d) { return {d.N, d.OG, d.KK(), d.Ho, d.Wo, d.cpg()}; }

Value per_point(Builder& b, const Deform& d, Value v) {  // [N, OG, KK, Ho, Wo] -> columns' shape
  return b.broadcast_in_dim(v, col_shape(d), {0, 1, 2, 3, 4});
}

// Columns [N, OG, KK, Ho, Wo, cpg] <-> the matmul's layout [N, G, (C/G) * KK, Ho * Wo].
Value cols_to_matmul(Builder& b, const Deform& d, Value cols) {
  Value t = b.transpose(cols, {0, 1, 5, 2, 3, 4});  // [N, OG, cpg, KK, Ho, Wo]
  return b.reshape(t, {d.N, d.G, (d.C / d.G) * d.KK(), d.Ho * d.Wo});
}
Value matmul_to_cols(Builder& b, const Deform& d, Value m) {
  Value t = b.reshape(m, {d.N, d.OG, d.cpg(), d.KK(), d.Ho, d.Wo});
  return b.transpose(t, {0, 1, 3, 4, 5, 2});
}

// A product under torch.get_float32_matmul_precision(), as matmul's.
Value product(Builder& b, Value lhs, Value rhs, const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
              const std::vector<int64_t>& lc, const std::vector<int64_t>& rc) {
  return b.dot_general(mxu_operand(b, lhs), mxu_operand(b, rhs), lb, rb, lc, rc, lhs.dtype(), matmul_precision());
}

Value mask_or_one(Builder& b, const Deform& d, Value mask) {
  Shape s{d.N, d.OG, d.KK(), d.Ho, d.Wo};
  if (!d.use_mask) return b.constant(1, d.t, s);
  if (mask.rank() != 4 || mask.shape()[1] != d.OG * d.KK() || mask.shape()[2] != d.Ho || mask.shape()[3] != d.Wo)
    throw InvalidArgument("mask has the wrong shape for the kernel, groups and output size");
  return b.reshape(mask, s);
}

// The sampled values without the mask: [N, OG, KK, Ho, Wo, cpg], and the
// per-tap gathered values.
Value bilinear(Builder& b, const Deform& d, Value xg, const Sample& sm, Values* taps) {
  Value acc = b.constant(0, d.t, col_shape(d));
  for (const Tap& tp : sm.taps) {
    Value v = gather_tap(b, d, xg, tp);
    if (taps) taps->push_back(v);
    acc = b.add(acc, b.mul(per_point(b, d, tp.w), v));
  }
  return acc;
}

// deform_conv2d(input, weight, offset, mask, bias, stride_h, stride_w, pad_h,
//   pad_w, dilation_h, dilation_w, groups, offset_groups, use_mask)
Values deform_conv2d(Builder& b, const Args& a, const Context&) {
  Value x = a[0].value(), weight = a[1].value(), offset = a[2].value(), mask = a[3].value(), bias = a[4].value();
  Deform d = setup(x, weight, offset, a, 5);
  Shape out{d.N, d.Cout, d.Ho, d.Wo};
  if (numel(out) == 0) return {full(b, 0, d.t, out)};
  const int64_t J = (d.C / d.G) * d.KK(), Cg = d.Cout / d.G;
  Value cols;
  if (x.type.numel() == 0) {
    cols = b.constant(0, d.t, col_shape(d));
  } else {
    Sample sm = sample(b, d, offset);
    cols = b.mul(bilinear(b, d, grouped_channels_last(b, d, x), sm, nullptr), per_point(b, d, mask_or_one(b, d, mask)));
  }
  Value w = b.reshape(weight, {d.G, Cg, J});
  Value y = product(b, w, cols_to_matmul(b, d, cols), {0}, {1}, {2}, {2});  // [G, Cg, N, P]
  y = b.reshape(b.transpose(y, {2, 0, 1, 3}), out);
  return {b.add(y, b.broadcast_in_dim(bias, out, {1}))};
}

// _deform_conv2d_backward(grad, input, weight, offset, mask, bias, ...same ints...)
//   -> (grad_input, grad_weight, grad_offset, grad_mask, grad_bias)
Values deform_conv2d_backward(Builder& b, const Args& a, const Context&) {
  Value grad = a[0].value(), x = a[1].value(), weight = a[2].value(), offset = a[3].value(), mask = a[4].value();
  Value bias = a[5].value();
  Deform d = setup(x, weight, offset, a, 6);
  const int64_t J = (d.C / d.G) * d.KK(), Cg = d.Cout / d.G, P = d.Ho * d.Wo;
  Value grad_bias = reduce_sum(b, grad, {0, 2, 3});
  const Shape& mshape = mask.shape();  // a placeholder [N, 1] when !use_mask; its gradient is zero
  if (grad.type.numel() == 0 || x.type.numel() == 0)
    return {full(b, 0, d.t, x.shape()), full(b, 0, d.t, weight.shape()), full(b, 0, d.t, offset.shape()),
            full(b, 0, d.t, mshape), b.reshape(grad_bias, bias.shape())};
  Sample sm = sample(b, d, offset);
  Value xg = grouped_channels_last(b, d, x);
  Values tap_values;
  Value val = bilinear(b, d, xg, sm, &tap_values);
  Value m = mask_or_one(b, d, mask);
  Value cols = b.mul(val, per_point(b, d, m));
  Value g = b.reshape(grad, {d.N, d.G, Cg, P});
  Value w = b.reshape(weight, {d.G, Cg, J});
  // grad_weight[g, co, j] = sum_{n, p} grad[n, g, co, p] * cols[n, g, j, p]
  Value gw = product(b, g, cols_to_matmul(b, d, cols), {1}, {1}, {0, 3}, {0, 3});  // [G, Cg, J]
  // grad_cols[n, g, j, p] = sum_co weight[g, co, j] * grad[n, g, co, p]
  Value gc = product(b, w, g, {0}, {1}, {1}, {2});  // [G, J, N, P]
  gc = matmul_to_cols(b, d, b.transpose(gc, {2, 0, 1, 3}));          // [N, OG, KK, Ho, Wo, cpg]
  Value gcm = b.mul(gc, per_point(b, d, m));
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = {5};
  dn.inserted_window_dims = {0, 1, 2, 3};
  dn.scatter_dims_to_operand_dims = {0, 1, 2, 3};
  dn.index_vector_dim = 5;
  Value gx = b.constant(0, d.t, {d.N, d.OG, d.H, d.W, d.cpg()});
  Value dvy = b.constant(0, d.t, col_shape(d)), dvx = dvy;
  for (size_t k = 0; k < sm.taps.size(); ++k) {
    const Tap& tp = sm.taps[k];
    gx = b.scatter(gx, tp.idx, b.mul(gcm, per_point(b, d, tp.w)), dn,
                   [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; });
    dvy = b.add(dvy, b.mul(per_point(b, d, tp.wy), tap_values[k]));
    dvx = b.add(dvx, b.mul(per_point(b, d, tp.wx), tap_values[k]));
  }
  Value grad_input = b.reshape(b.transpose(gx, {0, 1, 4, 2, 3}), x.shape());
  Value goy = reduce_sum(b, b.mul(gcm, dvy), {5}), gox = reduce_sum(b, b.mul(gcm, dvx), {5});  // [N, OG, KK, Ho, Wo]
  Shape s1{d.N, d.OG, d.KK(), 1, d.Ho, d.Wo};
  Value grad_offset = b.reshape(b.concatenate({b.reshape(goy, s1), b.reshape(gox, s1)}, 3), offset.shape());
  Value grad_mask = d.use_mask ? b.reshape(reduce_sum(b, b.mul(gc, val), {5}), mask.shape())
                               : full(b, 0, d.t, mask.shape());
  return {grad_input, b.reshape(gw, weight.shape()), grad_offset, grad_mask, b.reshape(grad_bias, bias.shape())};
}

TT_RULE({"torchvision::deform_conv2d"}, deform_conv2d);
TT_RULE({"torchvision::_deform_conv2d_backward"}, deform_conv2d_backward);

}  // namespace
}  // namespace tt::lowering
