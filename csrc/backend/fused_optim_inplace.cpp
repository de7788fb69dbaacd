// torch.optim's fused steps (_fused_adam_, _fused_adamw_, _fused_sgd_, their
// .tensor_lr overloads and the out= forms) mutate several tensor lists, which
// the generic in-place path (it rebinds argument 0) cannot express. These
// kernels run the functional op (native rules in
// csrc/lowering/ops/fused_optim.cpp) and copy its results back; a result
// covering its whole storage is rebound without a program (copy_'s fast
// path). Registered explicitly, so the generic registration leaves these
// overloads alone.
//
// A float lr is passed on as a CPU 0-d tensor, which the program reads as a
// runtime scalar: an lr schedule does not recompile the step.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

using at::Tensor;
using at::TensorList;
using OptTensor = std::optional<Tensor>;

// The lr as the .tensor_lr functional takes it: a tpu tensor as is, a CPU
// value (a float, or a CPU tensor as CUDA accepts) as a CPU 0-d double.
Tensor lr_tensor(double lr) { return at::scalar_tensor(lr, at::TensorOptions().dtype(at::kDouble)); }
Tensor lr_tensor(const Tensor& lr) {
  TORCH_CHECK(lr.numel() == 1, "lr must be a one-element tensor, got ", lr.numel(), " elements");
  return lr.is_cpu() ? lr.reshape({}).to(at::kDouble) : lr;
}

void write_back(TensorList dst, const std::vector<Tensor>& src) {
  TORCH_CHECK(dst.size() == src.size(), "expected ", src.size(), " tensors, got ", dst.size());
  for (size_t i = 0; i < dst.size(); ++i) const_cast<Tensor&>(dst[i]).copy_(src[i]);
}

void adam_into(bool decoupled, TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
               TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr, double beta1, double beta2,
               double weight_decay, double eps, bool amsgrad, bool maximize, const OptTensor& grad_scale,
               const OptTensor& found_inf, TensorList out) {
  if (self.empty()) return;
  auto r = decoupled ? at::_fused_adamw(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
                                        beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf)
                     : at::_fused_adam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
                                       beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
  write_back(out, std::get<0>(r));
  if (grad_scale.has_value()) write_back(grads, std::get<1>(r));  // unscaled; unchanged otherwise
  write_back(exp_avgs, std::get<2>(r));
  write_back(exp_avg_sqs, std::get<3>(r));
  if (amsgrad) write_back(max_exp_avg_sqs, std::get<4>(r));
}

// One set of kernels per Adam flavour: float/Tensor lr, in-place/out=.
template <bool Decoupled>
struct Adam {
  static void inplace(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                      TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1, double beta2,
                      double weight_decay, double eps, bool amsgrad, bool maximize, const OptTensor& grad_scale,
                      const OptTensor& found_inf) {
    adam_into(Decoupled, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr_tensor(lr), beta1,
              beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, self);
  }
  static void inplace_tensor_lr(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                                TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr, double beta1,
                                double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                                const OptTensor& grad_scale, const OptTensor& found_inf) {
    adam_into(Decoupled, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr_tensor(lr), beta1,
              beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, self);
  }
  static void out(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                  TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1, double beta2,
                  double weight_decay, double eps, bool amsgrad, bool maximize, const OptTensor& grad_scale,
                  const OptTensor& found_inf, TensorList out) {
    adam_into(Decoupled, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr_tensor(lr), beta1,
              beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, out);
  }
  static void out_tensor_lr(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                            TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr, double beta1,
                            double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                            const OptTensor& grad_scale, const OptTensor& found_inf, TensorList out) {
    adam_into(Decoupled, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr_tensor(lr), beta1,
              beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, out);
  }
};

void sgd_into(TensorList self, TensorList grads, TensorList momentum_buffers, double weight_decay, double momentum,
              const Tensor& lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
              const OptTensor& grad_scale, const OptTensor& found_inf, TensorList out) {
  if (self.empty()) return;
  auto r = at::_fused_sgd(self, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov, maximize,
                          is_first_step, grad_scale, found_inf);
  write_back(out, std::get<0>(r));
  if (grad_scale.has_value()) write_back(grads, std::get<1>(r));
  if (momentum != 0.0) write_back(momentum_buffers, std::get<2>(r));
}

void sgd_(TensorList self, TensorList grads, TensorList bufs, double weight_decay, double momentum, double lr,
          double dampening, bool nesterov, bool maximize, bool is_first_step, const OptTensor& grad_scale,
          const OptTensor& found_inf) {
  sgd_into(self, grads, bufs, weight_decay, momentum, lr_tensor(lr), dampening, nesterov, maximize, is_first_step,
           grad_scale, found_inf, self);
}

void sgd_tensor_lr_(TensorList self, TensorList grads, TensorList bufs, double weight_decay, double momentum,
                    const Tensor& lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                    const OptTensor& grad_scale, const OptTensor& found_inf) {
  sgd_into(self, grads, bufs, weight_decay, momentum, lr_tensor(lr), dampening, nesterov, maximize, is_first_step,
           grad_scale, found_inf, self);
}

void sgd_out(TensorList self, TensorList grads, TensorList bufs, double weight_decay, double momentum, double lr,
             double dampening, bool nesterov, bool maximize, bool is_first_step, const OptTensor& grad_scale,
             const OptTensor& found_inf, TensorList out) {
  sgd_into(self, grads, bufs, weight_decay, momentum, lr_tensor(lr), dampening, nesterov, maximize, is_first_step,
           grad_scale, found_inf, out);
}

void sgd_tensor_lr_out(TensorList self, TensorList grads, TensorList bufs, double weight_decay, double momentum,
                       const Tensor& lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                       const OptTensor& grad_scale, const OptTensor& found_inf, TensorList out) {
  sgd_into(self, grads, bufs, weight_decay, momentum, lr_tensor(lr), dampening, nesterov, maximize, is_first_step,
           grad_scale, found_inf, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", Adam<false>::inplace);
  m.impl("_fused_adam_.tensor_lr", Adam<false>::inplace_tensor_lr);
  m.impl("_fused_adam.out", Adam<false>::out);
  m.impl("_fused_adam.tensor_lr_out", Adam<false>::out_tensor_lr);
  m.impl("_fused_adamw_", Adam<true>::inplace);
  m.impl("_fused_adamw_.tensor_lr", Adam<true>::inplace_tensor_lr);
  m.impl("_fused_adamw.out", Adam<true>::out);
  m.impl("_fused_adamw.tensor_lr_out", Adam<true>::out_tensor_lr);
  m.impl("_fused_sgd_", sgd_);
  m.impl("_fused_sgd_.tensor_lr", sgd_tensor_lr_);
  m.impl("_fused_sgd.out", sgd_out);
  m.impl("_fused_sgd.tensor_lr_out", sgd_tensor_lr_out);
}

}  // namespace
}  // namespace tt::backend
