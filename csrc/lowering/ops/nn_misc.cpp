// Small nn ops: multi_margin_loss and multilabel_margin_loss with their
// backward ops, rrelu_with_noise_functional in evaluation mode and
// rrelu_with_noise_backward, and mode. Half types compute in f32 and round
// once. (im2col / col2im / _pdist_forward live in patches_pairs.cpp.)
#include <cmath>
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

DType compute_type(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// A Scalar's host value (rules registered with static_scalars only).
double host_scalar(const Arg& a) {
  if (a.kind == Arg::Kind::Int) return static_cast<double>(a.i);
  if (a.kind == Arg::Kind::Double) return a.d;
  if (a.scalar_kind == DType::F64) return a.d;
  if (a.scalar_kind == DType::Pred) return a.b ? 1 : 0;
  return static_cast<double>(a.i);
}

Value k64(Builder& b, int64_t v, const Shape& s) { return b.constant_int(v, DType::S64, s); }

// ---- margin losses ----------------------------------------------------------------------

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
  DType ct = compute_type(x.dtype());
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
  DType ct = compute_type(x.dtype());
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
  DType ct = compute_type(x.dtype());
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
  DType ct = compute_type(x.dtype());
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

// ---- rrelu ------------------------------------------------------------------------------

// rrelu_with_noise_functional(self, noise, lower, upper, training, generator)
//   -> (out, noise_out): in evaluation mode a leaky ReLU with slope
// (lower + upper) / 2, the noise unchanged. (The eager op rrelu_with_noise
// writes `noise` in place, which the backend's registration does not map to
// a rule; training mode's random slopes are declined.)
TT_RULE({"aten::rrelu_with_noise_functional"}, [](Builder& b, const Args& a, const Context& c) {
  if (a[4].b) throw LoweringError("rrelu_with_noise in training mode draws its noise in place");
  Value x = a[0].value();
  const Type& o = c.out();
  DType ct = compute_type(x.dtype());
  Value slope = b.div(b.add(b.convert(a[2].value(), DType::F64), b.convert(a[3].value(), DType::F64)),
                      b.constant(2, DType::F64));
  Value xc = b.convert(x, ct);
  Value neg = b.mul(xc, b.broadcast_in_dim(b.convert(slope, ct), xc.shape(), {}));
  Value r = b.select(b.compare(xc, full(b, 0, ct, xc.shape()), Cmp::GT), xc, neg);
  return Values{b.convert(r, o.dtype), a[1].value()};
});

// rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training,
//                           self_is_result)
TT_RULE({"aten::rrelu_with_noise_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value();
  DType ct = compute_type(g.dtype());
  Value gc = b.convert(g, ct), xc = b.convert(x, ct);
  double lower = host_scalar(a[3]), upper = host_scalar(a[4]);
  if (a[5].b && upper - lower > 1e-6)
    return Values{b.convert(b.mul(gc, b.convert(a[2].value(), ct)), c.out().dtype)};
  Value slope = b.constant((lower + upper) / 2, ct, gc.shape());
  Value r = b.select(b.compare(xc, full(b, 0, ct, xc.shape()), Cmp::GT), gc, b.mul(gc, slope));
  return Values{b.convert(r, c.out().dtype)};
}, false, true);

// ---- mode ---------------------------------------------------------------------------------

// mode(self, dim, keepdim) -> (values, indices): the most frequent value along
// dim (the smallest among equally frequent ones) and the index of its last
// occurrence, as the CPU kernel's sorted scan gives.
TT_RULE({"aten::mode"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Type& ov = c.out(0);
  const Type& oi = c.out(1);
  if (ov.numel() == 0 || x.type.numel() == 0)
    return Values{full(b, 0, ov.dtype, ov.shape), full(b, 0, DType::S64, oi.shape)};
  if (x.rank() == 0) return Values{x, b.constant_int(0, DType::S64)};
  int64_t d = wrap_dim(a[1].i, x.rank());
  DType t = x.dtype();
  Value xv = t == DType::Pred ? b.convert(x, DType::U8) : x;
  // Pairs: [.., n (i), n (j), ..]: x_i == x_j counted over j.
  Shape ps = xv.shape();
  ps.insert(ps.begin() + d + 1, xv.shape()[d]);
  std::vector<int64_t> di, dj;
  for (int64_t k = 0; k < xv.rank(); ++k) {
    di.push_back(k <= d ? k : k + 1);
    dj.push_back(k < d ? k : k + 1);
  }
  Value xi = b.broadcast_in_dim(xv, ps, di), xj = b.broadcast_in_dim(xv, ps, dj);
  Value freq = b.reduce(b.convert(b.compare(xi, xj, Cmp::EQ), DType::S64), b.constant_int(0, DType::S64), {d + 1},
                        "stablehlo.add");  // shaped like x
  Values best = b.reduce({freq, xv}, {b.constant_int(-1, DType::S64), b.constant(0, xv.dtype())}, {d},
                         [](Builder& bb, const Values& v) {
    Value af = v[0], av = v[1], xf = v[2], xv2 = v[3];
    Value take = bb.or_(bb.compare(xf, af, Cmp::GT),
                        bb.and_(bb.compare(xf, af, Cmp::EQ), bb.compare(xv2, av, Cmp::LT)));
    return Values{bb.select(take, xf, af), bb.select(take, xv2, av)};
  });
  Value mode = best[1];  // x's shape without d
  std::vector<int64_t> keep;
  for (int64_t k = 0; k < xv.rank(); ++k)
    if (k != d) keep.push_back(k);
  Value hit = b.compare(xv, b.broadcast_in_dim(mode, xv.shape(), keep), Cmp::EQ);
  Value pos = b.select(hit, b.iota(Type{DType::S64, xv.shape()}, d), k64(b, -1, xv.shape()));
  Value idx = b.reduce(pos, b.constant_int(-1, DType::S64), {d}, "stablehlo.maximum");
  return Values{b.reshape(b.convert(mode, t), ov.shape), b.reshape(idx, oi.shape)};
});

}  // namespace
}  // namespace tt::lowering
