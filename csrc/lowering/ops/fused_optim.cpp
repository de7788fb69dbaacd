// The fused optimizer steps torch.optim runs with fused=True, in their
// functional forms: _fused_adam, _fused_adamw and _fused_sgd, each with a
// float lr (.default) or a Tensor lr (.tensor_lr). The in-place forms mutate
// several tensor lists, which the generic in-place path (it writes argument
// 0) cannot express; csrc/backend/aten/fused_optim_inplace.cpp runs these rules
// and writes every result back.
//
// Per parameter, as PyTorch's fused kernels: compute in the opmath type (f32
// for f16/bf16), round each result once. With grad_scale, the gradient is
// divided by it first and that unscaled gradient is a result; with found_inf
// equal to 1, every result equals its input (the step is skipped).
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

Value scalar_of(Builder& b, const Arg& a, DType t) {
  if (a.is_tensor()) return b.reshape(b.convert(a.tensor, t), {});
  return b.constant(a.d, t);
}

// A 0-d value broadcast to `like`'s shape.
Value spread(Builder& b, Value s, Value like) { return b.broadcast_to(s, like.shape()); }

// The per-step options shared by every parameter: the unscale factor and the
// skip predicate (each invalid when its tensor is None).
struct Scaling {
  Value grad_scale;  // 0-d, compute type
  Value skip;        // 0-d i1: found_inf == 1
};

Scaling scaling(Builder& b, const Arg& grad_scale, const Arg& found_inf, DType t) {
  Scaling s;
  if (grad_scale.is_tensor()) s.grad_scale = scalar_of(b, grad_scale, t);
  if (found_inf.is_tensor()) {
    Value f = scalar_of(b, found_inf, DType::F32);
    s.skip = b.compare(f, b.constant(1.0, DType::F32), hlo::Cmp::EQ);
  }
  return s;
}

// `updated` (compute type) rounded to `old`'s dtype, or `old` when skipping.
Value finish(Builder& b, const Scaling& s, Value updated, Value old) {
  Value r = b.convert(updated, old.dtype());
  if (!s.skip.valid()) return r;
  return b.select(b.broadcast_to(s.skip, old.shape()), old, r);
}

// 1 - beta^step for a 0-d f32 step, as -expm1(step * log(beta)).
Value bias_correction(Builder& b, double beta, Value step) {
  Value x = b.mul(step, b.constant(std::log(beta), step.dtype()));
  return b.neg(b.unary("stablehlo.exponential_minus_one", x));
}

void check_lists(const Args& a, std::initializer_list<size_t> idx, const char* op) {
  const size_t n = a[0].tensors.size();
  for (size_t i : idx)
    if (a[i].tensors.size() != n)
      throw InvalidArgument(std::string(op) + ": every tensor list must have as many tensors as params");
}

// (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
//  beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale?, found_inf?)
//  -> (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs).
Values adam_step(Builder& b, const Args& a, bool decoupled) {
  const char* op = decoupled ? "_fused_adamw" : "_fused_adam";
  const double beta1 = a[7].d, beta2 = a[8].d, wd = a[9].d, eps = a[10].d;
  const bool amsgrad = a[11].b, maximize = a[12].b;
  check_lists(a, {1, 2, 3, 5}, op);
  if (amsgrad) check_lists(a, {4}, op);
  const size_t n = a[0].tensors.size();
  Values params, grads, avgs, sqs, maxs;
  for (size_t k = 0; k < n; ++k) {
    Value p0 = a[0].tensors[k], g0 = a[1].tensors[k], m0 = a[2].tensors[k], v0 = a[3].tensors[k];
    const DType t = compute_dtype(p0.dtype());
    Scaling s = scaling(b, a[13], a[14], t);
    auto c = [&](double v) { return full(b, v, t, p0.shape()); };
    Value lr = spread(b, scalar_of(b, a[6], t), p0);
    Value p = b.convert(p0, t), g = b.convert(g0, t);
    if (s.grad_scale.valid()) g = b.div(g, spread(b, s.grad_scale, g));
    Value unscaled = g;
    if (maximize) g = b.neg(g);
    if (wd != 0.0) {
      if (decoupled) p = b.mul(p, b.sub(c(1.0), b.mul(lr, c(wd))));
      else g = b.add(g, b.mul(p, c(wd)));
    }
    Value m = b.add(b.mul(b.convert(m0, t), c(beta1)), b.mul(g, c(1.0 - beta1)));
    Value v = b.add(b.mul(b.convert(v0, t), c(beta2)), b.mul(b.mul(g, g), c(1.0 - beta2)));
    Value step = b.reshape(b.convert(a[5].tensors[k], DType::F32), {});
    Value bc1 = spread(b, b.convert(bias_correction(b, beta1, step), t), p0);
    Value bc2_sqrt = spread(b, b.convert(b.sqrt(bias_correction(b, beta2, step)), t), p0);
    Value second = v;
    if (amsgrad) {
      Value mx = b.max(b.convert(a[4].tensors[k], t), v);
      maxs.push_back(finish(b, s, mx, a[4].tensors[k]));
      second = mx;
    }
    Value denom = b.add(b.div(b.sqrt(second), bc2_sqrt), c(eps));
    p = b.sub(p, b.div(b.mul(b.div(lr, bc1), m), denom));
    params.push_back(finish(b, s, p, p0));
    grads.push_back(finish(b, s, unscaled, g0));
    avgs.push_back(finish(b, s, m, m0));
    sqs.push_back(finish(b, s, v, v0));
  }
  // Without amsgrad the max list is passed through (PyTorch leaves it alone).
  if (!amsgrad) maxs = a[4].tensors;
  Values out;
  for (const Values* l : {&params, &grads, &avgs, &sqs, &maxs}) out.insert(out.end(), l->begin(), l->end());
  return out;
}

TT_RULE({"aten::_fused_adam", "aten::_fused_adam.tensor_lr"},
        [](Builder& b, const Args& a, const Context&) { return adam_step(b, a, false); });
TT_RULE({"aten::_fused_adamw", "aten::_fused_adamw.tensor_lr"},
        [](Builder& b, const Args& a, const Context&) { return adam_step(b, a, true); });

// (params, grads, momentum_buffers, weight_decay, momentum, lr, dampening,
//  nesterov, maximize, is_first_step, grad_scale?, found_inf?)
//  -> (params, grads, momentum_buffers). With momentum 0 the buffer list is
// empty; on the first step the buffer becomes the (decayed) gradient.
TT_RULE({"aten::_fused_sgd", "aten::_fused_sgd.tensor_lr"}, [](Builder& b, const Args& a, const Context&) {
  const double wd = a[3].d, momentum = a[4].d, dampening = a[6].d;
  const bool nesterov = a[7].b, maximize = a[8].b, first = a[9].b;
  check_lists(a, {1}, "_fused_sgd");
  if (momentum != 0.0) check_lists(a, {2}, "_fused_sgd");
  const size_t n = a[0].tensors.size();
  Values params, grads, bufs;
  for (size_t k = 0; k < n; ++k) {
    Value p0 = a[0].tensors[k], g0 = a[1].tensors[k];
    const DType t = compute_dtype(p0.dtype());
    Scaling s = scaling(b, a[10], a[11], t);
    auto c = [&](double v) { return full(b, v, t, p0.shape()); };
    Value p = b.convert(p0, t), g = b.convert(g0, t);
    if (s.grad_scale.valid()) g = b.div(g, spread(b, s.grad_scale, g));
    grads.push_back(finish(b, s, g, g0));
    if (maximize) g = b.neg(g);
    if (wd != 0.0) g = b.add(g, b.mul(p, c(wd)));
    if (momentum != 0.0) {
      Value buf0 = a[2].tensors[k];
      Value buf = first ? g : b.add(b.mul(b.convert(buf0, t), c(momentum)), b.mul(g, c(1.0 - dampening)));
      bufs.push_back(finish(b, s, buf, buf0));
      g = nesterov ? b.add(g, b.mul(buf, c(momentum))) : buf;
    }
    Value lr = spread(b, scalar_of(b, a[5], t), p0);
    params.push_back(finish(b, s, b.sub(p, b.mul(g, lr)), p0));
  }
  if (momentum == 0.0) bufs = a[2].tensors;
  Values out;
  for (const Values* l : {&params, &grads, &bufs}) out.insert(out.end(), l->begin(), l->end());
  return out;
});

}  // namespace
}  // namespace tt::lowering
