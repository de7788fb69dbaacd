// Convolution (forward and backward, plain and transposed, any spatial rank,
// groups, stride, padding, dilation) through PyTorch's convolution_overrideable hooks, and
// 2-D adaptive average pooling with its backward (max and average pooling
// live in pool3d_adaptive.cpp). NCHW layouts throughout.
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
