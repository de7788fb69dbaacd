// Mixed-precision loss scaling (torch.amp.GradScaler): the functional forms of
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_. The
// in-place and out= forms mutate two arguments, which the generic in-place
// path (it writes argument 0) cannot express; csrc/backend/aten/amp_inplace.cpp
// runs these rules and writes both results back.
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// True where `x` is neither inf nor nan (nan fails every comparison).
Value is_finite(Builder& b, Value x) {
  return b.compare(b.abs(x), full_like(b, x, std::numeric_limits<double>::infinity()), Cmp::LT);
}

// True when every element of `x` is finite.
Value all_finite(Builder& b, Value x) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < x.rank(); ++i) all.push_back(i);
  return b.reduce(is_finite(b, x), b.constant_int(1, DType::Pred), all, "stablehlo.and");
}

// (grads[], found_inf, inv_scale) -> (grads * inv_scale ..., found_inf').
// As PyTorch's kernels: each grad is multiplied in its opmath type (f32 for
// f16/bf16) and rounded back; found_inf becomes 1.0 when any element of any
// grad is inf or nan and is left unchanged otherwise (it accumulates over calls).
TT_RULE({"aten::_amp_foreach_non_finite_check_and_unscale"}, [](Builder& b, const Args& a, const Context& c) {
  const Values& grads = a[0].tensors;
  Value found = a[1].value(), inv_scale = a[2].value();
  if (found.rank() > 1 || inv_scale.rank() > 1 || numel(found.shape()) != 1 || numel(inv_scale.shape()) != 1)
    throw LoweringError("found_inf and inv_scale must be one-element tensors");
  Values out;
  Value finite = b.constant_int(1, DType::Pred);
  for (size_t i = 0; i < grads.size(); ++i) {
    Value g = grads[i];
    if (!hlo::is_float(g.dtype())) throw LoweringError("GradScaler can only unscale floating-point gradients");
    DType t = compute_dtype(g.dtype());
    Value s = b.broadcast_to(b.reshape(b.convert(inv_scale, t), {}), g.shape());
    out.push_back(b.convert(b.mul(b.convert(g, t), s), c.out(i).dtype));
    finite = b.and_(finite, all_finite(b, g));
  }
  Value one = full_like(b, found, 1.0);
  out.push_back(b.convert(b.select(b.broadcast_to(finite, found.shape()), found, one), c.out(grads.size()).dtype));
  return out;
});

// (scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval)
//   -> (scale', growth_tracker'):
// found_inf != 0: scale *= backoff, tracker = 0; else tracker + 1, and when it
// reaches growth_interval, scale *= growth (kept only if finite) and tracker = 0.
// PyTorch multiplies the f32 scale by the double factor and rounds to f32; we
// multiply in f32 (no f64 on a TPU), which is the same result whenever the
// factor is exact in f32 (the defaults 2.0 and 0.5 are).
TT_RULE({"aten::_amp_update_scale"}, [](Builder& b, const Args& a, const Context& c) {
  Value scale = a[0].value(), tracker = a[1].value(), found_inf = a[2].value();
  const double growth = a[3].d, backoff = a[4].d;
  const int64_t interval = a[5].i;
  Value found = b.compare(found_inf, full_like(b, found_inf, 0.0), Cmp::NE);  // nan counts as found
  found = b.broadcast_to(b.reshape(found, {}), scale.shape());
  Value successful = b.add(tracker, full_like(b, tracker, 1));
  Value grow = b.compare(successful, full_like(b, successful, static_cast<double>(interval)), Cmp::EQ);
  grow = b.broadcast_to(b.reshape(grow, {}), scale.shape());
  Value grown = b.mul(scale, full_like(b, scale, growth));
  Value after_growth = b.select(is_finite(b, grown), grown, scale);
  Value new_scale = b.select(found, b.mul(scale, full_like(b, scale, backoff)), b.select(grow, after_growth, scale));
  Value zero = full_like(b, tracker, 0);
  Value found_t = b.broadcast_to(b.reshape(found, {}), tracker.shape());
  Value grow_t = b.broadcast_to(b.reshape(grow, {}), tracker.shape());
  Value new_tracker = b.select(found_t, zero, b.select(grow_t, zero, successful));
  return Values{b.convert(new_scale, c.out(0).dtype), b.convert(new_tracker, c.out(1).dtype)};
});

}  // namespace
}  // namespace tt::lowering
