// Convolution (forward and backward, plain and transposed, any spatial rank,
// groups, stride, padding, dilation) through PyTorch's convolution_overrideable hooks, and
// 2-D max / average / adaptive average pooling with their backward ops. NCHW
// layouts throughout.
#include <algorithm>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/ops/pooling_common.h"

namespace tt::lowering {
namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::vector<int64_t> iota_vec(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// Half types convolve in f32 (PyTorch's CPU kernels accumulate in f32).

std::vector<int64_t> expand_param(const std::vector<int64_t>& v, size_t n) {
  if (v.size() == n) return v;
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  throw LoweringError("convolution: parameter has " + std::to_string(v.size()) + " entries, expected " +
                      std::to_string(n));
}

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
  size_t nsp;  // spatial rank
};

ConvParams conv_params(const Args& a, int first, size_t nsp) {
  // (stride, padding, dilation, transposed, output_padding, groups) start at `first`.
  return {expand_param(a[first].ints, nsp), expand_param(a[first + 1].ints, nsp),
          expand_param(a[first + 2].ints, nsp), expand_param(a[first + 4].ints, nsp), a[first + 3].b,
          a[first + 5].i, nsp};
}

hlo::Builder::ConvDims nchw(size_t nsp) {
  auto sp = iota_vec(2, 2 + static_cast<int64_t>(nsp));
  return {0, 1, sp, 0, 1, sp, 0, 1, sp};
}

// Float convolutions follow matmul_precision(), as dot products do.
std::string conv_precision(const Value& x) { return hlo::is_float(x.dtype()) ? matmul_precision() : ""; }

// A plain convolution of x [N, C, ...] with w [O, C/G, k...] (in the compute dtype).
Value conv_forward(Builder& b, Value x, Value w, const ConvParams& p) {
  size_t nsp = p.nsp;
  Pads pads;
  Shape out{x.shape()[0], w.shape()[0]};
  for (size_t k = 0; k < nsp; ++k) {
    pads.push_back({p.padding[k], p.padding[k]});
    int64_t span = p.dilation[k] * (w.shape()[2 + k] - 1) + 1;
    out.push_back((x.shape()[2 + k] + 2 * p.padding[k] - span) / p.stride[k] + 1);
  }
  return b.convolution(mxu_operand(b, x), mxu_operand(b, w), out, nchw(nsp), p.stride, pads,
                       std::vector<int64_t>(nsp, 1), p.dilation, p.groups, 1, x.dtype(), conv_precision(x));
}

// The gradient of conv_forward with respect to its input of shape `in_shape`:
// a transposed convolution of g with the flipped kernel, its in/out feature
// roles swapped within each group. (Also a transposed convolution's forward.)
Value conv_grad_input(Builder& b, Value g, Value w, const Shape& in_shape, const ConvParams& p) {
  size_t nsp = p.nsp;
  const int64_t G = p.groups, Oc = w.shape()[0], Icg = w.shape()[1], Ic = Icg * G;
  Shape ws = w.shape();
  Shape grouped{G, Oc / G, Icg};
  grouped.insert(grouped.end(), ws.begin() + 2, ws.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t k = 0; k < nsp; ++k) perm.push_back(3 + k);
  Value wt = b.transpose(b.reshape(w, grouped), perm);
  Shape swapped{Ic, Oc / G};
  swapped.insert(swapped.end(), ws.begin() + 2, ws.end());
  wt = b.reverse(b.reshape(wt, swapped), iota_vec(2, 2 + nsp));
  Pads pads;
  for (size_t k = 0; k < nsp; ++k) {
    int64_t kk = ws[2 + k], in = in_shape[2 + k], o = g.shape()[2 + k];
    int64_t span = p.dilation[k] * (kk - 1);
    int64_t rem = in + 2 * p.padding[k] - span - 1 - (o - 1) * p.stride[k];
    pads.push_back({span - p.padding[k], span - p.padding[k] + rem});
  }
  return b.convolution(mxu_operand(b, g), mxu_operand(b, wt), in_shape, nchw(nsp), std::vector<int64_t>(nsp, 1),
                       pads, p.stride, p.dilation, G, 1, g.dtype(), conv_precision(g));
}

// The gradient of conv_forward(x, w) with respect to w (of shape `w_shape`):
// x and g correlated over the batch; groups become batch groups so that each
// group's channels stay separate.
Value conv_grad_weight(Builder& b, Value x, Value g, const Shape& w_shape, const ConvParams& p) {
  size_t nsp = p.nsp;
  hlo::Builder::ConvDims dn;
  auto sp = iota_vec(2, 2 + nsp);
  dn.in_batch = 1;
  dn.in_feature = 0;
  dn.in_spatial = sp;
  dn.k_in = 0;
  dn.k_out = 1;
  dn.k_spatial = sp;
  dn.out_batch = 1;
  dn.out_feature = 0;
  dn.out_spatial = sp;
  Pads pads;
  for (size_t k = 0; k < nsp; ++k) {
    int64_t kk = w_shape[2 + k], in = x.shape()[2 + k], o = g.shape()[2 + k];
    int64_t high = (kk - 1) * p.dilation[k] + (o - 1) * p.stride[k] + 1 - in - p.padding[k];
    pads.push_back({p.padding[k], high});
  }
  return b.convolution(mxu_operand(b, x), mxu_operand(b, g), w_shape, dn, p.dilation, pads,
                       std::vector<int64_t>(nsp, 1), p.stride, 1, p.groups, x.dtype(), conv_precision(x));
}

// The output shape of a transposed convolution of x with w [C, O/G, k...].
Shape transposed_shape(Value x, Value w, const ConvParams& p) {
  Shape out{x.shape()[0], w.shape()[1] * p.groups};
  for (size_t k = 0; k < p.nsp; ++k)
    out.push_back((x.shape()[2 + k] - 1) * p.stride[k] - 2 * p.padding[k] +
                  p.dilation[k] * (w.shape()[2 + k] - 1) + p.output_padding[k] + 1);
  return out;
}

// convolution_overrideable(input, weight, bias, stride, padding, dilation,
//                          transposed, output_padding, groups)
TT_RULE({"aten::convolution_overrideable"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), w = a[1].value();
  size_t nsp = x.rank() - 2;
  ConvParams p = conv_params(a, 3, nsp);
  // PyTorch has no meta kernel for this hook, so the result type is derived
  // here (the public conv ops have already checked the shapes).
  DType out_dtype = x.dtype();
  DType ct = compute_dtype(out_dtype);
  if (p.transposed)
    for (size_t k = 0; k < nsp; ++k)
      if (p.output_padding[k] >= p.stride[k] && p.output_padding[k] >= p.dilation[k])
        throw std::runtime_error("output padding must be smaller than either stride or dilation, but got " +
                                 hlo::i64_list(p.output_padding) + " with stride " + hlo::i64_list(p.stride) +
                                 " and dilation " + hlo::i64_list(p.dilation));
  Value xc = b.convert(x, ct), wc = b.convert(w, ct);
  Value y = p.transposed ? conv_grad_input(b, xc, wc, transposed_shape(x, w, p), p) : conv_forward(b, xc, wc, p);
  if (a[2].is_tensor())
    y = b.add(y, b.broadcast_in_dim(b.convert(a[2].value(), ct), y.shape(), {1}));
  return Values{b.convert(y, out_dtype)};
});

// convolution_backward_overrideable(grad_output, input, weight, stride,
//   padding, dilation, transposed, output_padding, groups, output_mask)
TT_RULE({"aten::convolution_backward_overrideable"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value(), w = a[2].value();
  size_t nsp = x.rank() - 2;
  ConvParams p = conv_params(a, 3, nsp);
  const auto& mask = a[9].bools;
  DType ct = compute_dtype(x.dtype());
  Value gc = b.convert(g, ct), xc = b.convert(x, ct), wc = b.convert(w, ct);
  Values out(3);
  if (mask.size() > 0 && mask[0]) {
    // A transposed convolution is the input gradient of a plain one, so its
    // input gradient is the plain convolution of grad_output.
    Value gi = p.transposed ? conv_forward(b, gc, wc, p) : conv_grad_input(b, gc, wc, x.shape(), p);
    if (gi.shape() != x.shape()) throw LoweringError("convolution backward: unexpected input gradient shape");
    out[0] = b.convert(gi, x.dtype());
  }
  if (mask.size() > 1 && mask[1]) {
    Value gw = p.transposed ? conv_grad_weight(b, gc, xc, w.shape(), p) : conv_grad_weight(b, xc, gc, w.shape(), p);
    out[1] = b.convert(gw, w.dtype());
  }
  if (mask.size() > 2 && mask[2]) {
    std::vector<int64_t> dims{0};
    for (size_t k = 0; k < nsp; ++k) dims.push_back(2 + k);
    out[2] = b.convert(b.reduce(gc, b.constant(0, ct), dims, "stablehlo.add"), g.dtype());
  }
  return out;
});

// ---- pooling -------------------------------------------------------------------

struct Pool {
  std::vector<int64_t> window, strides, dilation;
  Pads pads;
};

// Window geometry over the trailing 2 dims of a 3-D or 4-D input; the high
// padding is whatever makes the output `out` long (ceil_mode adds to it).
Pool pool_geometry(const Shape& in, const Shape& out, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                   const std::vector<int64_t>& pad, const std::vector<int64_t>& dil) {
  size_t lead = in.size() - 2;
  Pool p;
  p.window.assign(lead, 1);
  p.strides.assign(lead, 1);
  p.dilation.assign(lead, 1);
  p.pads.assign(lead, {0, 0});
  auto kk = expand_param(k, 2), ss = s.empty() ? kk : expand_param(s, 2), pp = expand_param(pad, 2),
       dd = dil.empty() ? std::vector<int64_t>{1, 1} : expand_param(dil, 2);
  for (size_t i = 0; i < 2; ++i) {
    int64_t n = in[lead + i], o = out[lead + i];
    int64_t needed = (o - 1) * ss[i] + dd[i] * (kk[i] - 1) + 1;
    p.window.push_back(kk[i]);
    p.strides.push_back(ss[i]);
    p.dilation.push_back(dd[i]);
    p.pads.push_back({pp[i], std::max<int64_t>(needed - n - pp[i], 0)});
  }
  return p;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
TT_RULE({"aten::max_pool2d_with_indices"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Shape& os = c.out(0).shape;
  Pool p = pool_geometry(x.shape(), os, a[1].ints, a[2].ints, a[3].ints, a[4].ints);
  const Shape& s = x.shape();
  int64_t W = s.back();
  Type it{DType::S64, s};
  Value flat_index = b.add(b.mul(b.iota(it, x.rank() - 2), b.constant_int(W, DType::S64, s)), b.iota(it, x.rank() - 1));
  DType ct = compute_dtype(x.dtype());
  Value xv = b.convert(x, ct);
  Value init_v = b.constant(-std::numeric_limits<double>::infinity(), ct);
  Value init_i = b.constant_int(std::numeric_limits<int64_t>::max(), DType::S64);
  // Largest value wins; NaN counts as largest (PyTorch propagates it); ties
  // go to the first index in row-major order.
  Values r = b.reduce_window({xv, flat_index}, {init_v, init_i}, p.window, p.strides,
                             std::vector<int64_t>(x.rank(), 1), p.dilation, p.pads,
                             [](Builder& bb, const Values& v) {
    Value av = v[0], ai = v[1], xv2 = v[2], xi = v[3];
    Value a_nan = bb.compare(av, av, hlo::Cmp::NE), x_nan = bb.compare(xv2, xv2, hlo::Cmp::NE);
    Value greater = bb.or_(bb.compare(xv2, av, hlo::Cmp::GT), bb.and_(x_nan, bb.not_(a_nan)));
    Value equal = bb.or_(bb.compare(xv2, av, hlo::Cmp::EQ), bb.and_(x_nan, a_nan));
    Value take = bb.or_(greater, bb.and_(equal, bb.compare(xi, ai, hlo::Cmp::LT)));
    return Values{bb.select(take, xv2, av), bb.select(take, xi, ai)};
  });
  return Values{b.convert(r[0], x.dtype()), r[1]};
});

// max_pool2d_with_indices_backward(grad_output, self, kernel, stride, padding,
//                                  dilation, ceil_mode, indices)
TT_RULE({"aten::max_pool2d_with_indices_backward"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{pooling::scatter_to_planes(b, a[0].value(), a[7].value(), a[1].value().shape(), 2)};
});

// Divisors of avg_pool2d: the window size, or (count_include_pad false) the
// number of real elements, never counting ceil_mode's extra padding.
Value pool_counts(Builder& b, const Shape& in, const Pool& p, const Shape& out, bool include_pad, DType ct) {
  size_t r = in.size();
  std::vector<int64_t> low(r), high(r), extra(r), zero(r, 0);
  Shape ones_shape = in;
  for (size_t i = 0; i < r; ++i) {
    low[i] = p.pads[i].first;
    high[i] = std::min(p.pads[i].first, p.pads[i].second);  // the symmetric, real padding
    extra[i] = p.pads[i].second - high[i];
  }
  Value ones = full(b, 1, ct, in);
  Value padded = b.pad(ones, b.constant(include_pad ? 1 : 0, ct), low, high, zero);
  padded = b.pad(padded, b.constant(0, ct), zero, extra, zero);
  Pads none(r, {0, 0});
  return b.reduce_window({padded}, {b.constant(0, ct)}, p.window, p.strides, std::vector<int64_t>(r, 1), p.dilation,
                         none, [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; })[0];
}

// avg_pool2d(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
TT_RULE({"aten::avg_pool2d"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Shape& os = c.out().shape;
  Pool p = pool_geometry(x.shape(), os, a[1].ints, a[2].ints, a[3].ints, {});
  DType ct = compute_dtype(x.dtype());
  Value sum = b.reduce_window({b.convert(x, ct)}, {b.constant(0, ct)}, p.window, p.strides,
                              std::vector<int64_t>(x.rank(), 1), p.dilation, p.pads,
                              [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; })[0];
  Value div = a[6].is_none() ? pool_counts(b, x.shape(), p, os, a[5].b, ct) : b.constant(a[6].i, ct, os);
  return Values{b.convert(b.div(sum, div), x.dtype())};
});

// avg_pool2d_backward(grad_output, self, kernel, stride, padding, ceil_mode,
//                     count_include_pad, divisor_override)
TT_RULE({"aten::avg_pool2d_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value();
  const Shape& os = g.shape();
  Pool p = pool_geometry(x.shape(), os, a[2].ints, a[3].ints, a[4].ints, {});
  DType ct = compute_dtype(g.dtype());
  Value div = a[7].is_none() ? pool_counts(b, x.shape(), p, os, a[6].b, ct) : b.constant(a[7].i, ct, os);
  Value y = b.div(b.convert(g, ct), div);
  // Spread each window's share back: dilate by the stride, pad by the window,
  // sum each window, then crop the padding.
  size_t r = x.rank();
  std::vector<int64_t> low(r), high(r), interior(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t padded = x.shape()[i] + p.pads[i].first + p.pads[i].second;
    int64_t covered = (os[i] - 1) * p.strides[i] + p.window[i];
    interior[i] = p.strides[i] - 1;
    low[i] = p.window[i] - 1;
    high[i] = p.window[i] - 1 + (padded - covered);
  }
  Value spread = b.pad(y, b.constant(0, ct), low, high, interior);
  Pads none(r, {0, 0});
  Value sums = b.reduce_window({spread}, {b.constant(0, ct)}, p.window, std::vector<int64_t>(r, 1),
                               std::vector<int64_t>(r, 1), std::vector<int64_t>(r, 1), none,
                               [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; })[0];
  std::vector<int64_t> start(r), limit(r);
  for (size_t i = 0; i < r; ++i) {
    start[i] = p.pads[i].first;
    limit[i] = p.pads[i].first + x.shape()[i];
  }
  return Values{b.convert(b.slice(sums, start, limit), x.dtype())};
});

}  // namespace
}  // namespace tt::lowering

// ---- adaptive average pooling ----------------------------------------------------
namespace tt::lowering {
namespace {

// _adaptive_avg_pool2d(self, output_size): sums through 0/1 window matrices,
// divided by each window's element count.
TT_RULE({"aten::_adaptive_avg_pool2d"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Type& o = c.out();
  if (!hlo::is_float(compute_dtype(x.dtype()))) throw LoweringError("adaptive_avg_pool2d of integers");
  pooling::check_nonempty(x.shape(), 2, "adaptive_avg_pool2d");
  if (o.numel() == 0 || x.type.numel() == 0) return Values{full(b, 0, o.dtype, o.shape)};
  return Values{b.convert(pooling::adaptive_avg(b, x, x.shape(), o.shape, 2, false), o.dtype)};
});

// _adaptive_avg_pool2d_backward(grad_output, self)
TT_RULE({"aten::_adaptive_avg_pool2d_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value();
  if (g.type.numel() == 0 || x.type.numel() == 0) return Values{full(b, 0, c.out().dtype, x.shape())};
  return Values{b.convert(pooling::adaptive_avg(b, g, x.shape(), g.shape(), 2, true), c.out().dtype)};
});

}  // namespace
}  // namespace tt::lowering
