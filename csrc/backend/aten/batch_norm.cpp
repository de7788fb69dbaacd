// Batch norm in training mode updates running_mean / running_var in place,
// but native_batch_norm's schema does not mark them as written, so the
// generic in-place path (which writes argument 0) cannot express it. These
// kernels run the functional form (its rule returns the new statistics) and
// copy the statistics back.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

using Opt = const std::optional<at::Tensor>&;

std::tuple<at::Tensor, at::Tensor, at::Tensor> with_running_stats(const at::Tensor& input, Opt weight, Opt bias,
                                                                  at::Tensor running_mean, at::Tensor running_var,
                                                                  bool training, double momentum, double eps) {
  auto r = at::_native_batch_norm_legit_functional(input, weight, bias, running_mean, running_var, training,
                                                   momentum, eps);
  running_mean.copy_(std::get<3>(r));
  running_var.copy_(std::get<4>(r));
  return {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(const at::Tensor& input, Opt weight, Opt bias,
                                                                 Opt running_mean, Opt running_var, bool training,
                                                                 double momentum, double eps) {
  bool has_stats = running_mean.has_value() && running_mean->defined() && running_var.has_value() &&
                   running_var->defined();
  if (!training) {
    TORCH_CHECK(has_stats, "running_mean and running_var must be defined in evaluation mode");
    return at::_native_batch_norm_legit_no_training(input, weight, bias, *running_mean, *running_var, momentum, eps);
  }
  if (has_stats) return with_running_stats(input, weight, bias, *running_mean, *running_var, true, momentum, eps);
  return at::_native_batch_norm_legit(input, weight, bias, true, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(const at::Tensor& input, Opt weight, Opt bias,
                                                                       at::Tensor& running_mean,
                                                                       at::Tensor& running_var, bool training,
                                                                       double momentum, double eps) {
  if (!training)
    return at::_native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps);
  return with_running_stats(input, weight, bias, running_mean, running_var, true, momentum, eps);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", native_batch_norm_legit);
}

}  // namespace
}  // namespace tt::backend
