// Normalization layers and their backward ops: native_layer_norm(_backward),
// native_batch_norm (eval, and training without running stats),
// _native_batch_norm_legit_functional / _no_training / .no_stats,
// native_batch_norm_backward, native_group_norm(_backward), and renorm (each
// slice's p-norm capped at maxnorm). Statistics are computed in f32 for
// f16/bf16 inputs (f64 stays f64).
//
// Output-mask convention for the backward ops: an output whose mask entry is
// false is returned as an invalid Value (PyTorch returns an undefined tensor).
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

DType stat_dtype(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

double count_of(const Shape& s, const std::vector<int64_t>& dims) {
  double n = 1;
  for (auto d : dims) n *= static_cast<double>(s[d]);
  return n;
}

// Mean over `dims`, broadcast back to x's shape.
Value mean_full(Builder& b, Value x, const std::vector<int64_t>& dims) {
  Value s = reduce_sum(b, x, dims);
  s = b.div(s, full_like(b, s, count_of(x.shape(), dims)));
  return expand_reduced(b, s, x.shape(), dims);
}

// A per-channel vector (C) broadcast along `channel_dim` of `shape`, or a
// trailing-aligned tensor when channel_dim < 0 (layer norm's weight).
Value per_channel(Builder& b, Value v, DType t, const Shape& shape, int64_t channel_dim) {
  v = b.convert(v, t);
  if (channel_dim < 0) return b.broadcast_to(v, shape);
  return b.broadcast_in_dim(v, shape, {channel_dim});
}

bool mask(const Arg& m, size_t i) { return m.kind != Arg::Kind::BoolList || i >= m.bools.size() || m.bools[i]; }

// ---- layer norm -------------------------------------------------------------------

std::vector<int64_t> trailing_dims(int64_t rank, size_t n) {
  std::vector<int64_t> dims;
  for (int64_t i = rank - static_cast<int64_t>(n); i < rank; ++i) dims.push_back(i);
  return dims;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
TT_RULE({"aten::native_layer_norm"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  auto dims = trailing_dims(x.rank(), a[1].ints.size());
  DType t = stat_dtype(x.dtype());
  x = b.convert(x, t);
  Value mean = mean_full(b, x, dims);
  Value d = b.sub(x, mean);
  Value var = mean_full(b, b.mul(d, d), dims);
  Value rstd = b.rsqrt(b.add(var, full_like(b, var, a[4].d)));
  Value y = b.mul(d, rstd);
  if (!a[2].is_none()) y = b.mul(y, per_channel(b, a[2].value(), t, x.shape(), -1));
  if (!a[3].is_none()) y = b.add(y, per_channel(b, a[3].value(), t, x.shape(), -1));
  // mean/rstd: one value per normalized row, shaped with trailing 1s.
  Value m = b.reshape(b.slice(mean, std::vector<int64_t>(x.rank(), 0), c.out(1).shape), c.out(1).shape);
  Value r = b.reshape(b.slice(rstd, std::vector<int64_t>(x.rank(), 0), c.out(2).shape), c.out(2).shape);
  return Values{y, m, r};
});
TT_PADDING({"aten::native_layer_norm"}, Padding::fill({}));

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
//                            weight?, bias?, output_mask) -> (gi, gw, gb)
TT_RULE({"aten::native_layer_norm_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[1].value();
  auto dims = trailing_dims(x.rank(), a[2].ints.size());
  std::vector<int64_t> batch;
  for (int64_t i = 0; i < x.rank() - static_cast<int64_t>(dims.size()); ++i) batch.push_back(i);
  DType t = stat_dtype(x.dtype());
  x = b.convert(x, t);
  Value g = b.convert(a[0].value(), t);
  Value mean = b.broadcast_to(b.convert(a[3].value(), t), x.shape());
  Value rstd = b.broadcast_to(b.convert(a[4].value(), t), x.shape());
  Value xhat = b.mul(b.sub(x, mean), rstd);
  const Arg& m = a[7];
  Values out(3);
  if (mask(m, 0)) {
    Value gw = a[5].is_none() ? g : b.mul(g, per_channel(b, a[5].value(), t, x.shape(), -1));
    Value gi = b.sub(b.sub(gw, mean_full(b, gw, dims)), b.mul(xhat, mean_full(b, b.mul(gw, xhat), dims)));
    out[0] = b.mul(rstd, gi);
  }
  if (mask(m, 1) && !a[5].is_none()) out[1] = b.reshape(reduce_sum(b, b.mul(g, xhat), batch), a[5].value().shape());
  if (mask(m, 2) && !a[6].is_none()) out[2] = b.reshape(reduce_sum(b, g, batch), a[6].value().shape());
  return out;
});
TT_PADDING({"aten::native_layer_norm_backward"},
           Padding::fill({{"grad_out", 0}, {"input", 0}, {"mean", 0}, {"rstd", 0}}));

// ---- batch norm ------------------------------------------------------------------------

std::vector<int64_t> non_channel_dims(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i)
    if (i != 1) dims.push_back(i);
  return dims;
}

struct BatchNormResult {
  Value out, save_mean, save_invstd, mean, var_unbiased;
};

// Training-mode batch norm: batch statistics per channel (dim 1).
BatchNormResult bn_train(Builder& b, Value input, const Arg& w, const Arg& bias, double eps) {
  DType t = stat_dtype(input.dtype());
  Value x = b.convert(input, t);
  auto dims = non_channel_dims(x.rank());
  double n = count_of(x.shape(), dims);
  Value sum = reduce_sum(b, x, dims);
  Value mean = b.div(sum, full_like(b, sum, n));
  Value d = b.sub(x, b.broadcast_in_dim(mean, x.shape(), {1}));
  Value ss = reduce_sum(b, b.mul(d, d), dims);
  Value var = b.div(ss, full_like(b, ss, n));
  Value invstd = b.rsqrt(b.add(var, full_like(b, var, eps)));
  Value y = b.mul(d, b.broadcast_in_dim(invstd, x.shape(), {1}));
  if (!w.is_none()) y = b.mul(y, per_channel(b, w.value(), t, x.shape(), 1));
  if (!bias.is_none()) y = b.add(y, per_channel(b, bias.value(), t, x.shape(), 1));
  Value unbiased = b.div(ss, full_like(b, ss, n > 1 ? n - 1 : 0));
  return {y, mean, invstd, mean, unbiased};
}

// Eval-mode batch norm with running statistics.
Value bn_eval(Builder& b, Value input, const Arg& w, const Arg& bias, Value rm, Value rv, double eps) {
  DType t = stat_dtype(input.dtype());
  Value x = b.convert(input, t);
  Value invstd = b.rsqrt(b.add(b.convert(rv, t), full_like(b, b.convert(rv, t), eps)));
  Value y = b.mul(b.sub(x, per_channel(b, rm, t, x.shape(), 1)), per_channel(b, invstd, t, x.shape(), 1));
  if (!w.is_none()) y = b.mul(y, per_channel(b, w.value(), t, x.shape(), 1));
  if (!bias.is_none()) y = b.add(y, per_channel(b, bias.value(), t, x.shape(), 1));
  return y;
}

Value empty_like_type(Builder& b, const Type& t) { return b.constant(0, t.dtype, t.shape); }

// The running-stat update: (1 - momentum) * running + momentum * batch.
Value ema(Builder& b, Value running, Value batch, double momentum) {
  DType t = running.dtype();
  Value bt = b.convert(batch, t);
  return b.add(b.mul(running, full_like(b, running, 1 - momentum)), b.mul(bt, full_like(b, bt, momentum)));
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
//                   training, momentum, eps) -> (out, save_mean, save_invstd)
// In training with running stats PyTorch updates running_mean/var in place,
// which the schema does not declare and the executor cannot write: declined.
TT_RULE({"aten::native_batch_norm"}, [](Builder& b, const Args& a, const Context& c) {
  bool training = a[5].b;
  double eps = a[7].d;
  if (training) {
    if (!a[3].is_none() || !a[4].is_none())
      throw LoweringError("native_batch_norm in training mode updates running_mean/running_var in place, "
                          "which the executor cannot write yet");
    auto r = bn_train(b, a[0].value(), a[1], a[2], eps);
    return Values{r.out, r.save_mean, r.save_invstd};
  }
  if (a[3].is_none() || a[4].is_none()) throw LoweringError("native_batch_norm: eval mode without running stats");
  Value y = bn_eval(b, a[0].value(), a[1], a[2], a[3].value(), a[4].value(), eps);
  return Values{y, empty_like_type(b, c.out(1)), empty_like_type(b, c.out(2))};
});

// _native_batch_norm_legit_functional(input, weight?, bias?, running_mean,
//   running_var, training, momentum, eps)
//   -> (out, save_mean, save_rstd, running_mean_out, running_var_out)
TT_RULE({"aten::_native_batch_norm_legit_functional"}, [](Builder& b, const Args& a, const Context& c) {
  bool training = a[5].b;
  double momentum = a[6].d, eps = a[7].d;
  Value rm = a[3].value(), rv = a[4].value();
  if (!training) {
    Value y = bn_eval(b, a[0].value(), a[1], a[2], rm, rv, eps);
    return Values{y, empty_like_type(b, c.out(1)), empty_like_type(b, c.out(2)), rm, rv};
  }
  auto r = bn_train(b, a[0].value(), a[1], a[2], eps);
  return Values{r.out, r.save_mean, r.save_invstd, ema(b, rm, r.mean, momentum), ema(b, rv, r.var_unbiased, momentum)};
});

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean,
//   running_var, momentum, eps) -> (out, save_mean, save_rstd)
TT_RULE({"aten::_native_batch_norm_legit_no_training"}, [](Builder& b, const Args& a, const Context& c) {
  Value y = bn_eval(b, a[0].value(), a[1], a[2], a[3].value(), a[4].value(), a[6].d);
  return Values{y, empty_like_type(b, c.out(1)), empty_like_type(b, c.out(2))};
});

// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)
TT_RULE({"aten::_native_batch_norm_legit.no_stats"}, [](Builder& b, const Args& a, const Context& c) {
  auto r = bn_train(b, a[0].value(), a[1], a[2], a[5].d);
  return Values{r.out, r.save_mean, r.save_invstd};
});

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
//   running_var?, save_mean?, save_invstd?, train, eps, output_mask)
TT_RULE({"aten::native_batch_norm_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[1].value();
  DType t = stat_dtype(x.dtype());
  x = b.convert(x, t);
  Value g = b.convert(a[0].value(), t);
  bool train = a[7].b;
  double eps = a[8].d;
  auto dims = non_channel_dims(x.rank());
  double n = count_of(x.shape(), dims);
  Value mean, invstd;
  if (train) {
    if (a[5].is_none() || a[6].is_none()) throw LoweringError("native_batch_norm_backward without saved stats");
    mean = b.convert(a[5].value(), t);
    invstd = b.convert(a[6].value(), t);
  } else {
    if (a[3].is_none() || a[4].is_none()) throw LoweringError("native_batch_norm_backward without running stats");
    mean = b.convert(a[3].value(), t);
    Value rv = b.convert(a[4].value(), t);
    invstd = b.rsqrt(b.add(rv, full_like(b, rv, eps)));
  }
  Value xhat = b.mul(b.sub(x, per_channel(b, mean, t, x.shape(), 1)), per_channel(b, invstd, t, x.shape(), 1));
  Value gb = reduce_sum(b, g, dims);
  Value gw = reduce_sum(b, b.mul(g, xhat), dims);
  Value scale = invstd;
  if (!a[2].is_none()) scale = b.mul(scale, b.convert(a[2].value(), t));
  const Arg& m = a[9];
  Values out(3);
  if (mask(m, 0)) {
    Value gi = g;
    if (train) {
      Value mg = per_channel(b, b.div(gb, full_like(b, gb, n)), t, x.shape(), 1);
      Value mgx = per_channel(b, b.div(gw, full_like(b, gw, n)), t, x.shape(), 1);
      gi = b.sub(b.sub(g, mg), b.mul(xhat, mgx));
    }
    out[0] = b.mul(gi, per_channel(b, scale, t, x.shape(), 1));
  }
  if (mask(m, 1)) out[1] = gw;
  if (mask(m, 2)) out[2] = gb;
  return out;
});

// ---- group norm -------------------------------------------------------------------------

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
TT_RULE({"aten::native_group_norm"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t n = a[3].i, ch = a[4].i, hw = a[5].i, g = a[6].i;
  DType t = stat_dtype(x.dtype());
  Shape grouped{n, g, ch / g * hw};
  Value xg = b.reshape(b.convert(x, t), grouped);
  Value mean = mean_full(b, xg, {2});
  Value d = b.sub(xg, mean);
  Value var = mean_full(b, b.mul(d, d), {2});
  Value rstd = b.rsqrt(b.add(var, full_like(b, var, a[7].d)));
  Value y = b.reshape(b.mul(d, rstd), x.shape());
  if (!a[1].is_none()) y = b.mul(y, per_channel(b, a[1].value(), t, x.shape(), 1));
  if (!a[2].is_none()) y = b.add(y, per_channel(b, a[2].value(), t, x.shape(), 1));
  Value m = b.reshape(b.slice(mean, {0, 0, 0}, {n, g, 1}), {n, g});
  Value r = b.reshape(b.slice(rstd, {0, 0, 0}, {n, g, 1}), {n, g});
  return Values{y, m, r};
});

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW,
//                            group, output_mask) -> (gi, gw, gb)
TT_RULE({"aten::native_group_norm_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[1].value();
  int64_t n = a[5].i, ch = a[6].i, hw = a[7].i, grp = a[8].i;
  DType t = stat_dtype(x.dtype());
  x = b.convert(x, t);
  Value g = b.convert(a[0].value(), t);
  // (N, G, C/G, HxW) view: channel-wise and group-wise sums are both easy.
  Shape s4{n, grp, ch / grp, hw};
  Value x4 = b.reshape(x, s4), g4 = b.reshape(g, s4);
  Value mean = b.broadcast_in_dim(b.convert(a[2].value(), t), s4, {0, 1});
  Value rstd = b.broadcast_in_dim(b.convert(a[3].value(), t), s4, {0, 1});
  Value xhat = b.mul(b.sub(x4, mean), rstd);
  const Arg& m = a[9];
  Values out(3);
  if (mask(m, 0)) {
    Value gw = g4;
    if (!a[4].is_none())
      gw = b.mul(g4, b.broadcast_in_dim(b.reshape(b.convert(a[4].value(), t), {grp, ch / grp}), s4, {1, 2}));
    Value gi = b.sub(b.sub(gw, mean_full(b, gw, {2, 3})), b.mul(xhat, mean_full(b, b.mul(gw, xhat), {2, 3})));
    out[0] = b.reshape(b.mul(rstd, gi), x.shape());
  }
  if (mask(m, 1) && !a[4].is_none())
    out[1] = b.reshape(reduce_sum(b, b.mul(g4, xhat), {0, 3}), {ch});
  if (mask(m, 2)) out[2] = b.reshape(reduce_sum(b, g4, {0, 3}), {ch});
  return out;
});

// ---- renorm ----------------------------------------------------------------------------

// renorm(x, p, dim, maxnorm): each slice along dim whose p-norm exceeds
// maxnorm is scaled by maxnorm / (norm + 1e-7), as PyTorch does.
TT_RULE({"aten::renorm"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value x = b.convert(a[0].value(), ct);
  int64_t d = wrap_dim(a[2].i, x.rank());
  std::vector<int64_t> others;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (k != d) others.push_back(k);
  Value p = cast_to(b, a[1].value(), ct, x.shape());
  Value norm = reduce_sum(b, b.binary("stablehlo.power", b.abs(x), p), others);
  Shape ns = norm.shape();
  Value pn = cast_to(b, a[1].value(), ct, ns);
  norm = b.binary("stablehlo.power", norm, b.div(b.constant(1, ct, ns), pn));
  // p = inf is the max norm (p is a runtime value: both are computed).
  Value inf_norm = reduce_max(b, b.abs(x), others);
  norm = b.select(b.compare(pn, b.constant(std::numeric_limits<double>::infinity(), ct, ns), Cmp::EQ), inf_norm, norm);
  Value maxn = cast_to(b, a[3].value(), ct, ns);
  Value f = b.select(b.compare(norm, maxn, Cmp::GT), b.div(maxn, b.add(norm, b.constant(1e-7, ct, ns))),
                     b.constant(1, ct, ns));
  return Values{b.convert(b.mul(x, expand_reduced(b, f, x.shape(), others)), out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
