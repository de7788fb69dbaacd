// Losses: nll_loss_forward / nll_loss2d_forward and their backward ops (what
// F.cross_entropy and F.nll_loss reach, with weight, ignore_index and every
// reduction), mse_loss(_backward), smooth_l1_loss(_backward),
// huber_loss(_backward), binary_cross_entropy(_backward). l1_loss and
// cross_entropy decompose before reaching the backend.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

DType loss_dtype(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

// reduction: 0 none, 1 mean, 2 sum.
Value reduce_loss(Builder& b, Value l, int64_t reduction) {
  if (reduction == 0) return l;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < l.rank(); ++i) all.push_back(i);
  Value s = reduce_sum(b, l, all);
  if (reduction == 1) s = b.div(s, full_like(b, s, static_cast<double>(numel(l.shape()))));
  return s;
}

// The gradient of a reduced loss w.r.t. each element: grad broadcast to
// `shape`, divided by the element count for mean.
Value loss_grad(Builder& b, Value g, const Shape& shape, int64_t reduction, DType t) {
  g = b.broadcast_to(b.convert(g, t), shape);
  if (reduction == 1) g = b.div(g, full_like(b, g, static_cast<double>(numel(shape))));
  return g;
}

// ---- nll_loss ---------------------------------------------------------------------

// For input (N, C, ...) or (C,) and target (N, ...) or (): the one-hot of the
// target along the class dim, the per-element weight (0 where ignored).
struct NllParts {
  Value onehot;  // pred, input's shape
  Value w;       // t, target's shape
  int64_t class_dim;
};

NllParts nll_parts(Builder& b, Value self, Value target, const Arg& weight, int64_t ignore_index, DType t) {
  int64_t cd = self.rank() >= 2 ? 1 : 0;
  std::vector<int64_t> tdims;
  for (int64_t i = 0; i < self.rank(); ++i)
    if (i != cd) tdims.push_back(i);
  target = b.convert(target, DType::S64);
  Value tb = b.broadcast_in_dim(target, self.shape(), tdims);
  Value classes = b.iota(Type{DType::S64, self.shape()}, cd);
  Value onehot = b.compare(tb, classes, Cmp::EQ);
  Value keep = b.compare(target, b.constant_int(ignore_index, DType::S64, target.shape()), Cmp::NE);
  Value w;
  if (weight.is_none()) {
    w = b.convert(keep, t);
  } else {
    Value wf = b.broadcast_in_dim(b.convert(weight.value(), t), self.shape(), {cd});
    Value picked = reduce_sum(b, b.select(onehot, wf, full_like(b, wf, 0)), {cd});
    w = b.select(keep, picked, full_like(b, picked, 0));
  }
  return {onehot, w, cd};
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
Values nll_forward(Builder& b, const Args& a, const Context& c) {
  DType t = loss_dtype(c.out(0).dtype);
  Value self = b.convert(a[0].value(), t);
  int64_t reduction = a[3].i;
  auto p = nll_parts(b, self, a[1].value(), a[2], a[4].i, t);
  Value picked = reduce_sum(b, b.select(p.onehot, self, full_like(b, self, 0)), {p.class_dim});
  Value loss = b.neg(b.mul(picked, p.w));
  std::vector<int64_t> all;
  for (int64_t i = 0; i < p.w.rank(); ++i) all.push_back(i);
  Value total = reduce_sum(b, p.w, all);
  Value out;
  if (reduction == 0) out = loss;
  else {
    out = reduce_sum(b, loss, all);
    if (reduction == 1) out = b.div(out, total);
  }
  return {b.reshape(out, c.out(0).shape), b.reshape(total, c.out(1).shape)};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
Values nll_backward(Builder& b, const Args& a, const Context& c) {
  DType t = loss_dtype(c.out().dtype);
  Value self = a[1].value();
  int64_t reduction = a[4].i;
  auto p = nll_parts(b, self, a[2].value(), a[3], a[5].i, t);
  Value g = b.convert(a[0].value(), t);
  Value gn;  // per target element
  if (reduction == 0) {
    gn = b.reshape(g, p.w.shape());
  } else {
    g = b.reshape(g, {});
    if (reduction == 1) g = b.div(g, b.reshape(b.convert(a[6].value(), t), {}));
    gn = b.broadcast_to(g, p.w.shape());
  }
  Value per = b.neg(b.mul(gn, p.w));
  std::vector<int64_t> tdims;
  for (int64_t i = 0; i < self.rank(); ++i)
    if (i != p.class_dim) tdims.push_back(i);
  Value full = b.broadcast_in_dim(per, self.shape(), tdims);
  return {b.select(p.onehot, full, full_like(b, full, 0))};
}

TT_RULE({"aten::nll_loss_forward", "aten::nll_loss2d_forward"}, nll_forward);
TT_RULE({"aten::nll_loss_backward", "aten::nll_loss2d_backward"}, nll_backward);

// ---- pointwise losses -----------------------------------------------------------------

// (self, target) converted to the loss dtype and broadcast together.
std::pair<Value, Value> pair(Builder& b, const Args& a, size_t i, DType t) {
  Shape s = broadcast_shapes({a[i].value().shape(), a[i + 1].value().shape()});
  return {cast_to(b, a[i].value(), t, s), cast_to(b, a[i + 1].value(), t, s)};
}

// A pointwise loss(self, target, reduction, ...) rule.
template <typename F>
Values pointwise_loss(Builder& b, const Args& a, const Context& c, F f) {
  DType t = loss_dtype(c.out().dtype);
  auto [x, y] = pair(b, a, 0, t);
  return {b.reshape(reduce_loss(b, f(b, x, y), a[2].i), c.out().shape)};
}

// A pointwise loss backward(grad_output, self, target, reduction, ...) rule:
// dloss/dself given (x, y), times the broadcast grad.
template <typename F>
Values pointwise_loss_backward(Builder& b, const Args& a, const Context& c, F f) {
  DType t = loss_dtype(c.out().dtype);
  auto [x, y] = pair(b, a, 1, t);
  if (x.shape() != c.out().shape) throw LoweringError("loss backward with broadcast target");
  Value g = loss_grad(b, a[0].value(), x.shape(), a[3].i, t);
  return {b.mul(f(b, x, y), g)};
}

TT_RULE({"aten::mse_loss"}, [](Builder& b, const Args& a, const Context& c) {
  return pointwise_loss(b, a, c, [](Builder& b, Value x, Value y) {
    Value d = b.sub(x, y);
    return b.mul(d, d);
  });
});
TT_RULE({"aten::mse_loss_backward"}, [](Builder& b, const Args& a, const Context& c) {
  return pointwise_loss_backward(b, a, c, [](Builder& b, Value x, Value y) {
    Value d = b.sub(x, y);
    return b.add(d, d);
  });
});

// smooth_l1: |d| < beta ? 0.5 d^2 / beta : |d| - 0.5 beta (beta 0: l1).
TT_RULE({"aten::smooth_l1_loss"}, [](Builder& b, const Args& a, const Context& c) {
  double beta = a[3].d;
  return pointwise_loss(b, a, c, [beta](Builder& b, Value x, Value y) {
    Value d = b.abs(b.sub(x, y));
    if (beta == 0) return d;
    Value quad = b.div(b.mul(full_like(b, d, 0.5), b.mul(d, d)), full_like(b, d, beta));
    return b.select(b.compare(d, full_like(b, d, beta), Cmp::LT), quad, b.sub(d, full_like(b, d, 0.5 * beta)));
  });
});
TT_RULE({"aten::smooth_l1_loss_backward"}, [](Builder& b, const Args& a, const Context& c) {
  double beta = a[4].d;
  return pointwise_loss_backward(b, a, c, [beta](Builder& b, Value x, Value y) {
    Value d = b.sub(x, y);
    Value sign = b.unary("stablehlo.sign", d);
    if (beta == 0) return sign;
    Value inner = b.compare(b.abs(d), full_like(b, d, beta), Cmp::LT);
    return b.select(inner, b.div(d, full_like(b, d, beta)), sign);
  });
});

// huber: |d| < delta ? 0.5 d^2 : delta (|d| - 0.5 delta).
TT_RULE({"aten::huber_loss"}, [](Builder& b, const Args& a, const Context& c) {
  double delta = a[3].d;
  return pointwise_loss(b, a, c, [delta](Builder& b, Value x, Value y) {
    Value d = b.abs(b.sub(x, y));
    Value quad = b.mul(full_like(b, d, 0.5), b.mul(d, d));
    Value lin = b.mul(full_like(b, d, delta), b.sub(d, full_like(b, d, 0.5 * delta)));
    return b.select(b.compare(d, full_like(b, d, delta), Cmp::LT), quad, lin);
  });
});
TT_RULE({"aten::huber_loss_backward"}, [](Builder& b, const Args& a, const Context& c) {
  double delta = a[4].d;
  return pointwise_loss_backward(b, a, c, [delta](Builder& b, Value x, Value y) {
    Value d = b.sub(x, y);
    return b.clamp(full_like(b, d, -delta), d, full_like(b, d, delta));
  });
});

// binary_cross_entropy(self, target, weight?, reduction): logs clamped at -100.
TT_RULE({"aten::binary_cross_entropy"}, [](Builder& b, const Args& a, const Context& c) {
  DType t = loss_dtype(c.out().dtype);
  Value x = b.convert(a[0].value(), t), y = b.convert(a[1].value(), t);
  Value lo = full_like(b, x, -100);
  Value one = full_like(b, x, 1);
  Value lx = b.max(b.log(x), lo), l1x = b.max(b.log(b.sub(one, x)), lo);
  Value l = b.neg(b.add(b.mul(y, lx), b.mul(b.sub(one, y), l1x)));
  if (!a[2].is_none()) l = b.mul(l, cast_to(b, a[2].value(), t, l.shape()));
  return Values{b.reshape(reduce_loss(b, l, a[3].i), c.out().shape)};
});
// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction):
//   grad * (x - y) / max(x (1 - x), 1e-12) * weight
TT_RULE({"aten::binary_cross_entropy_backward"}, [](Builder& b, const Args& a, const Context& c) {
  DType t = loss_dtype(c.out().dtype);
  Value x = b.convert(a[1].value(), t), y = b.convert(a[2].value(), t);
  Value one = full_like(b, x, 1);
  Value denom = b.max(b.mul(x, b.sub(one, x)), full_like(b, x, 1e-12));
  Value r = b.div(b.sub(x, y), denom);
  if (!a[3].is_none()) r = b.mul(r, cast_to(b, a[3].value(), t, r.shape()));
  return Values{b.mul(r, loss_grad(b, a[0].value(), x.shape(), a[4].i, t))};
});

}  // namespace
}  // namespace tt::lowering
