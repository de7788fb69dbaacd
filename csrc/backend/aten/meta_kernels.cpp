// Meta kernels for ops that have tpu rules but no meta kernel in PyTorch
// (it has them only for CUDA): _thnn_fused_gru_cell and its backward, and
// the in-place fused optimizer steps that PyTorch's Python meta
// registrations leave out (_fused_adam_.tensor_lr, _fused_adamw_.tensor_lr,
// _fused_sgd_, _fused_sgd_.tensor_lr). With them, the executor learns result
// types (and list lengths) the usual way — the autogen functional forms run
// the in-place meta kernel on clones — and FakeTensor can trace these ops
// for torch.compile. Each is registered only where PyTorch has none, so a
// later PyTorch that adds its own keeps it.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

namespace tt::backend {
namespace {

using at::Tensor;
using at::TensorList;
using OptTensor = std::optional<Tensor>;

// PyTorch's rnn_cell_checkSizes (CUDA) for a cell with `gates` gate blocks.
void check_cell_sizes(const Tensor& input_gates, const Tensor& hidden_gates, const OptTensor& input_bias,
                      const OptTensor& hidden_bias, int64_t gates, const Tensor& prev_hidden) {
  TORCH_CHECK(input_gates.dim() == 2, "expected input_gates to be 2-dimensional, got ", input_gates.dim());
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "input_gates and hidden_gates must have the same size, got ",
              input_gates.sizes(), " and ", hidden_gates.sizes());
  const int64_t gates_size = input_gates.size(1);
  for (const OptTensor* b : {&input_bias, &hidden_bias}) {
    if (!b->has_value() || !(*b)->defined()) continue;
    TORCH_CHECK((*b)->dim() == 1 && (*b)->numel() == gates_size, "expected each bias to have ", gates_size,
                " elements, got ", (*b)->sizes());
  }
  TORCH_CHECK(gates_size % gates == 0, "the gate size ", gates_size, " is not a multiple of ", gates);
  const int64_t expected = input_gates.size(0) * gates_size / gates;
  TORCH_CHECK(prev_hidden.numel() == expected, prev_hidden.numel(), " != ", input_gates.size(0), " * ", gates_size,
              " // ", gates, " (aka ", expected, ")");
}

std::tuple<Tensor, Tensor> gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                    const OptTensor& input_bias, const OptTensor& hidden_bias) {
  check_cell_sizes(input_gates, hidden_gates, input_bias, hidden_bias, 3, hx);
  Tensor workspace = at::empty({hx.size(0), hx.size(1) * 5}, hx.options());
  return {at::empty_like(hx, at::MemoryFormat::Contiguous), workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy, const Tensor& workspace,
                                                                      bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == grad_hy.size(1) * 5,
              "_thnn_fused_gru_cell_backward: workspace ", workspace.sizes(), " does not match grad_hy ",
              grad_hy.sizes());
  Tensor gi = at::empty({grad_hy.size(0), grad_hy.size(1) * 3}, grad_hy.options());
  Tensor gh = at::empty_like(gi);
  Tensor bias = has_bias ? at::empty({gi.size(1)}, gi.options()) : Tensor();
  return {gi, gh, at::empty_like(grad_hy, at::MemoryFormat::Contiguous), bias, has_bias ? at::empty_like(bias) : Tensor()};
}

void check_same_length(TensorList a, TensorList b, const char* what) {
  TORCH_CHECK(a.size() == b.size(), "expected ", a.size(), " ", what, ", got ", b.size());
}

void adam_tensor_lr(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                    TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor&, double, double, double, double,
                    bool amsgrad, bool, const OptTensor&, const OptTensor&) {
  check_same_length(self, grads, "grads");
  check_same_length(self, exp_avgs, "exp_avgs");
  check_same_length(self, exp_avg_sqs, "exp_avg_sqs");
  check_same_length(self, state_steps, "state_steps");
  if (amsgrad) check_same_length(self, max_exp_avg_sqs, "max_exp_avg_sqs");
}

void sgd_checks(TensorList self, TensorList grads, TensorList bufs, double momentum) {
  check_same_length(self, grads, "grads");
  if (momentum != 0.0) check_same_length(self, bufs, "momentum buffers");
}

void sgd(TensorList self, TensorList grads, TensorList bufs, double, double momentum, double, double, bool, bool, bool,
         const OptTensor&, const OptTensor&) {
  sgd_checks(self, grads, bufs, momentum);
}

void sgd_tensor_lr(TensorList self, TensorList grads, TensorList bufs, double, double momentum, const Tensor&, double,
                   bool, bool, bool, const OptTensor&, const OptTensor&) {
  sgd_checks(self, grads, bufs, momentum);
}

bool has_meta(const char* name, const char* overload) {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  return op && op->hasKernelForDispatchKey(c10::DispatchKey::Meta);
}

struct Registration {
  std::unique_ptr<torch::Library> lib;
  template <typename F>
  void add(const char* name, const char* overload, F* fn) {
    if (has_meta(name, overload)) return;
    if (!lib) lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__,
                                                     __LINE__);
    std::string n = std::string(name).substr(6) + (*overload ? std::string(".") + overload : "");
    lib->impl(n.c_str(), fn);
  }
  Registration() {
    add("aten::_thnn_fused_gru_cell", "", gru_cell);
    add("aten::_thnn_fused_gru_cell_backward", "", gru_cell_backward);
    add("aten::_fused_adam_", "tensor_lr", adam_tensor_lr);
    add("aten::_fused_adamw_", "tensor_lr", adam_tensor_lr);
    add("aten::_fused_sgd_", "", sgd);
    add("aten::_fused_sgd_", "tensor_lr", sgd_tensor_lr);
  }
};

Registration g_registration;

}  // namespace
}  // namespace tt::backend
