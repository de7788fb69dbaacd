// GradScaler's in-place and out= ops mutate two arguments each (the grads and
// found_inf; the scale and the growth tracker), which the generic in-place
// path (it rebinds argument 0) cannot express. These kernels run the
// functional op (native rules in csrc/lowering/ops/amp.cpp) and copy its
// results back, device to device. Registered explicitly, so the generic
// registration leaves these overloads alone.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

using at::Tensor;

void check_scalar_f32(const Tensor& t, const char* what) {
  TORCH_CHECK(t.numel() == 1, what, " must be a one-element tensor, got ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be a float32 tensor, got ", t.scalar_type());
}

void check_unscale_args(at::TensorList grads, const Tensor& found_inf, const Tensor& inv_scale) {
  check_scalar_f32(found_inf, "found_inf");
  check_scalar_f32(inv_scale, "inv_scale");
  for (const Tensor& g : grads) {
    TORCH_CHECK(g.device() == inv_scale.device(), "every gradient must be on ", inv_scale.device(),
                " (inv_scale's device), got one on ", g.device());
    TORCH_CHECK(g.is_floating_point(), "GradScaler can only unscale floating-point gradients, got ",
                g.scalar_type());
  }
}

void foreach_unscale_into(at::TensorList grads, Tensor& found_inf, const Tensor& inv_scale, at::TensorList out) {
  check_unscale_args(grads, found_inf, inv_scale);
  if (grads.empty()) return;
  auto r = at::_amp_foreach_non_finite_check_and_unscale(grads, found_inf, inv_scale);
  const auto& unscaled = std::get<0>(r);
  for (size_t i = 0; i < out.size(); ++i) out[i].copy_(unscaled[i]);
  found_inf.copy_(std::get<1>(r));
}

void foreach_unscale_(at::TensorList self, Tensor& found_inf, const Tensor& inv_scale) {
  foreach_unscale_into(self, found_inf, inv_scale, self);
}

void foreach_unscale_out(at::TensorList self, Tensor& found_inf, const Tensor& inv_scale, at::TensorList out) {
  TORCH_CHECK(out.size() == self.size(), "expected ", self.size(), " out tensors, got ", out.size());
  foreach_unscale_into(self, found_inf, inv_scale, out);
}

void check_update_args(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf) {
  check_scalar_f32(scale, "current_scale");
  check_scalar_f32(found_inf, "found_inf");
  TORCH_CHECK(growth_tracker.numel() == 1 && growth_tracker.scalar_type() == at::kInt,
              "growth_tracker must be a one-element int32 tensor");
}

Tensor& update_scale_out(const Tensor& self, Tensor& growth_tracker, const Tensor& found_inf, double growth,
                         double backoff, int64_t interval, Tensor& out) {
  check_update_args(self, growth_tracker, found_inf);
  auto r = at::_amp_update_scale(self, growth_tracker, found_inf, growth, backoff, interval);
  out.copy_(std::get<0>(r));
  growth_tracker.copy_(std::get<1>(r));
  return out;
}

Tensor& update_scale_(Tensor& self, Tensor& growth_tracker, const Tensor& found_inf, double growth, double backoff,
                      int64_t interval) {
  return update_scale_out(self, growth_tracker, found_inf, growth, backoff, interval, self);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", foreach_unscale_);
  m.impl("_amp_foreach_non_finite_check_and_unscale.out", foreach_unscale_out);
  m.impl("_amp_update_scale_", update_scale_);
  m.impl("_amp_update_scale.out", update_scale_out);
}

}  // namespace
}  // namespace tt::backend
