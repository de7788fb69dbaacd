// Losses: nll_loss_forward / nll_loss2d_forward and their backward ops (what
// F.cross_entropy and F.nll_loss reach, with weight, ignore_index and every
// reduction), mse_loss(_backward), smooth_l1_loss(_backward),
// huber_loss(_backward), binary_cross_entropy(_backward), multi_margin_loss
// and multilabel_margin_loss with their backward ops (half types compute in
// f32 and round once). l1_loss and cross_entropy decompose before reaching
// the backend.
#include <cmath>

#include "lowering/device_check.h"
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
  {
    // A target outside [0, C) that is not ignore_index raises as on the CPU.
    Value target = b.convert(a[1].value(), DType::S64);
    const Shape& ts = target.shape();
    int64_t classes = self.shape()[self.rank() >= 2 ? 1 : 0];
    Value out = b.or_(b.compare(target, b.constant_int(0, DType::S64, ts), hlo::Cmp::LT),
                      b.compare(target, b.constant_int(classes, DType::S64, ts), hlo::Cmp::GE));
    Value ignored = b.compare(target, b.constant_int(a[4].i, DType::S64, ts), hlo::Cmp::EQ);
    check_each(b, c, b.and_(out, b.not_(ignored)), target, CheckError::Index, "Target {} is out of bounds.");
  }
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
TT_PADDING({"aten::nll_loss_forward"}, Padding::fill({{"self", 0}, {"target", 0, true}}));
TT_RULE({"aten::nll_loss_backward", "aten::nll_loss2d_backward"}, nll_backward);
TT_PADDING({"aten::nll_loss_backward"}, Padding::fill({{"self", 0}, {"target", 0, true}}));

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

// ---- margin losses ----------------------------------------------------------------------


Value k64(Builder& b, int64_t v, const Shape& s) { return b.constant_int(v, DType::S64, s); }

// x [N, C] at column idx[r, k] of each row r: [N, K] (idx clamped into range).
Value take_cols(Builder& b, Value x, Value idx) {
  int64_t N = idx.shape()[0], K = idx.shape()[1], C = x.shape()[1];
  Shape s{N, K};
  Value col = b.clamp(k64(b, 0, s), b.convert(idx, DType::S64), k64(b, C - 1, s));
  Value coords = b.concatenate({b.reshape(b.iota(Type{DType::S64, s}, 0), {N, K, 1}), b.reshape(col, {N, K, 1})}, 2);
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0, 1};
  dn.start_index_map = {0, 1};
  dn.index_vector_dim = 2;
  return b.gather(x, coords, dn, {1, 1}, s);
}

// Input seen as [N, C] (a 1-D input is one row, a 0-d one a single element).
Value as_rows(Builder& b, Value x) {
  if (x.rank() == 2) return x;
  if (x.rank() == 1) return b.reshape(x, {1, x.shape()[0]});
  return b.reshape(x, {1, 1});
}

// An empty input's mean is NaN (0 / 0), as on the CPU.
bool reduction_is_mean(int64_t reduction) { return reduction == 1; }

// The per-row losses [N] reduced as `reduction` asks (0 none, 1 mean, 2 sum)
// and shaped `out`.
Value reduce_loss(Builder& b, Value rows, int64_t reduction, const Type& out) {
  DType ct = rows.dtype();
  int64_t N = rows.shape()[0];
  if (reduction == 0) return b.convert(b.reshape(rows, out.shape), out.dtype);
  Value s = b.reduce(rows, b.constant(0, ct), {0}, "stablehlo.add");
  if (reduction == 1) s = b.div(s, b.constant(static_cast<double>(N), ct));
  return b.convert(b.reshape(s, out.shape), out.dtype);
}

// The upstream gradient per row [N]: grad_output itself (none), or its one
// value (divided by N for mean).
Value row_grads(Builder& b, Value go, int64_t reduction, int64_t N, DType ct) {
  Value g = b.convert(go, ct);
  if (reduction == 0) return b.reshape(g, {N});
  g = b.reshape(g, {});
  if (reduction == 1) g = b.div(g, b.constant(static_cast<double>(N), ct));
  return b.broadcast_in_dim(g, {N}, {});
}

struct MultiMargin {
  Value z, active, weight_rows;  // [N, C] margin terms, z > 0 off the target, [N] w[target]
  Value target_hit;               // [N, C] j == target
  int64_t N, C;
};

// multi_margin_loss's terms: z[n, j] = margin - x[n, y_n] + x[n, j].
MultiMargin multi_margin_terms(Builder& b, Value x, Value target, const Arg& margin, const Arg& weight, DType ct) {
  MultiMargin mm;
  Value xr = b.convert(as_rows(b, x), ct);
  mm.N = xr.shape()[0];
  mm.C = xr.shape()[1];
  Shape s{mm.N, mm.C};
  Value t = b.reshape(b.convert(target, DType::S64), {mm.N, 1});
  Value xy = b.broadcast_in_dim(b.reshape(take_cols(b, xr, t), {mm.N}), s, {0});
  Value mg = b.broadcast_in_dim(b.convert(margin.value(), ct), s, {});
  mm.z = b.add(b.sub(mg, xy), xr);
  mm.target_hit = b.compare(b.iota(Type{DType::S64, s}, 1), b.broadcast_in_dim(b.reshape(t, {mm.N}), s, {0}), Cmp::EQ);
  mm.active = b.and_(b.not_(mm.target_hit), b.compare(mm.z, full(b, 0, ct, s), Cmp::GT));
  if (weight.is_tensor()) {
    int64_t nw = weight.value().type.numel();
    Value wb = b.broadcast_in_dim(b.reshape(b.convert(weight.value(), ct), {nw}), {mm.N, nw}, {1});
    mm.weight_rows = b.reshape(take_cols(b, wb, t), {mm.N});
  }
  return mm;
}

int64_t margin_p(const Arg& p) {
  double v = host_scalar(p);
  if (v != 1 && v != 2) throw InvalidArgument("only p == 1 and p == 2 supported");
  return static_cast<int64_t>(v);
}

// multi_margin_loss(self, target, p, margin, weight?, reduction)
TT_RULE({"aten::multi_margin_loss"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Type& o = c.out();
  int64_t p = margin_p(a[2]);
  DType ct = compute_dtype(x.dtype());
  if (x.type.numel() == 0) return Values{full(b, reduction_is_mean(a[5].i) ? NAN : 0, o.dtype, o.shape)};
  MultiMargin mm = multi_margin_terms(b, x, a[1].value(), a[3], a[4], ct);
  Shape s{mm.N, mm.C};
  Value h = p == 1 ? mm.z : b.mul(mm.z, mm.z);
  h = b.select(mm.active, h, full(b, 0, ct, s));
  if (mm.weight_rows.valid()) h = b.mul(h, b.broadcast_in_dim(mm.weight_rows, s, {0}));
  Value rows = b.div(b.reduce(h, b.constant(0, ct), {1}, "stablehlo.add"),
                     b.constant(static_cast<double>(mm.C), ct, {mm.N}));
  return Values{reduce_loss(b, rows, a[5].i, o)};
}, false, true);

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction)
TT_RULE({"aten::multi_margin_loss_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value go = a[0].value(), x = a[1].value();
  int64_t p = margin_p(a[3]);
  DType ct = compute_dtype(x.dtype());
  if (x.type.numel() == 0) return Values{full(b, 0, x.dtype(), x.shape())};
  MultiMargin mm = multi_margin_terms(b, x, a[2].value(), a[4], a[5], ct);
  Shape s{mm.N, mm.C};
  Value g = row_grads(b, go, a[6].i, mm.N, ct);
  g = b.div(g, b.constant(static_cast<double>(mm.C), ct, {mm.N}));
  if (mm.weight_rows.valid()) g = b.mul(g, mm.weight_rows);
  Value gb = b.broadcast_in_dim(g, s, {0});
  Value h = p == 1 ? gb : b.mul(b.mul(gb, mm.z), full(b, 2, ct, s));
  h = b.select(mm.active, h, full(b, 0, ct, s));
  Value at_target = b.neg(b.reduce(h, b.constant(0, ct), {1}, "stablehlo.add"));
  Value gi = b.select(mm.target_hit, b.broadcast_in_dim(at_target, s, {0}), h);
  return Values{b.convert(b.reshape(gi, x.shape()), x.dtype())};
}, false, true);

struct MultiLabel {
  Value valid;      // [N, K] label k counts (no negative label at or before k)
  Value is_target;  // [N, C] column j is one of the row's labels
  Value onehot;     // [N, K, C] valid label k is column j
  Value active;     // [N, K, C] hinge term of (label k, non-label j) is positive
  Value z;          // [N, K, C] 1 - x[y_k] + x[j]
  int64_t N, C;
};

MultiLabel multilabel_terms(Builder& b, Value x, Value target, DType ct) {
  MultiLabel ml;
  Value xr = b.convert(as_rows(b, x), ct);
  Value t = b.convert(as_rows(b, target), DType::S64);
  ml.N = xr.shape()[0];
  ml.C = xr.shape()[1];
  int64_t N = ml.N, C = ml.C, K = C;
  Shape nkk{N, K, K}, nkc{N, K, C};
  // Labels stop at the first negative one.
  Value neg = b.convert(b.compare(t, k64(b, 0, {N, K}), Cmp::LT), DType::S64);
  Value upto = b.compare(b.iota(Type{DType::S64, nkk}, 2), b.iota(Type{DType::S64, nkk}, 1), Cmp::LE);
  Value negs = b.select(upto, b.broadcast_in_dim(neg, nkk, {0, 2}), k64(b, 0, nkk));
  Value seen = b.reduce(negs, b.constant_int(0, DType::S64), {2}, "stablehlo.add");
  ml.valid = b.compare(seen, k64(b, 0, {N, K}), Cmp::EQ);
  Value col = b.iota(Type{DType::S64, nkc}, 2);
  ml.onehot = b.and_(b.compare(col, b.broadcast_in_dim(t, nkc, {0, 1}), Cmp::EQ),
                     b.broadcast_in_dim(ml.valid, nkc, {0, 1}));
  ml.is_target = b.reduce(ml.onehot, b.constant(0, DType::Pred), {1}, "stablehlo.or");
  Value xy = take_cols(b, xr, t);  // [N, K]
  ml.z = b.add(b.sub(full(b, 1, ct, nkc), b.broadcast_in_dim(xy, nkc, {0, 1})), b.broadcast_in_dim(xr, nkc, {0, 2}));
  ml.active = b.and_(b.and_(b.broadcast_in_dim(ml.valid, nkc, {0, 1}),
                            b.not_(b.broadcast_in_dim(ml.is_target, nkc, {0, 2}))),
                     b.compare(ml.z, full(b, 0, ct, nkc), Cmp::GT));
  return ml;
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
TT_RULE({"aten::multilabel_margin_loss_forward"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Type& o = c.out(0);
  const Type& it = c.out(1);
  DType ct = compute_dtype(x.dtype());
  if (x.type.numel() == 0)
    return Values{full(b, reduction_is_mean(a[2].i) ? NAN : 0, o.dtype, o.shape), full(b, 0, it.dtype, it.shape)};
  MultiLabel ml = multilabel_terms(b, x, a[1].value(), ct);
  Value h = b.select(ml.active, ml.z, full(b, 0, ct, ml.z.shape()));
  Value rows = b.div(b.reduce(h, b.constant(0, ct), {1, 2}, "stablehlo.add"),
                     b.constant(static_cast<double>(ml.C), ct, {ml.N}));
  return Values{reduce_loss(b, rows, a[2].i, o), b.reshape(b.convert(ml.is_target, it.dtype), it.shape)};
});

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
TT_RULE({"aten::multilabel_margin_loss_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value go = a[0].value(), x = a[1].value();
  DType ct = compute_dtype(x.dtype());
  if (x.type.numel() == 0) return Values{full(b, 0, x.dtype(), x.shape())};
  MultiLabel ml = multilabel_terms(b, x, a[2].value(), ct);
  int64_t N = ml.N, C = ml.C;
  Shape nkc = ml.z.shape();
  Value g = b.div(row_grads(b, go, a[3].i, N, ct), b.constant(static_cast<double>(C), ct, {N}));
  Value act = b.convert(ml.active, ct);
  Value to_nonlabels = b.reduce(act, b.constant(0, ct), {1}, "stablehlo.add");   // [N, C]
  Value per_label = b.reduce(act, b.constant(0, ct), {2}, "stablehlo.add");      // [N, K]
  Value to_labels = b.reduce(b.mul(b.convert(ml.onehot, ct), b.broadcast_in_dim(per_label, nkc, {0, 1})),
                             b.constant(0, ct), {1}, "stablehlo.add");            // [N, C]
  Value gi = b.mul(b.sub(to_nonlabels, to_labels), b.broadcast_in_dim(g, {N, C}, {0}));
  return Values{b.convert(b.reshape(gi, x.shape()), x.dtype())};
});

}  // namespace
}  // namespace tt::lowering
