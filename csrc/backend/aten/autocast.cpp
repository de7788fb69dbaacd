// torch.autocast("tpu"): the AutocastPrivateUse1 dispatch key.
//
// PyTorch registers autocast kernels for its in-tree devices only; an
// out-of-tree backend registers its own. We register CUDA's policy, op for op,
// from the op lists PyTorch's header shares for this purpose (ATen/autocast_mode.h):
//   lower_precision_fp  matmuls, convolutions, linear, attention -> the autocast dtype
//   fp32                pointwise ops that lose range, norms, losses -> float32
//   fp32_set_opt_dtype  softmax, sum, cumsum, prod, norms -> float32 via their dtype= argument
//   fp32_append_dtype   norm.Scalar / norm.ScalarOpt_dim -> float32
//   promote             multi-input ops (addcmul, index_put, ...) -> the widest input type
// and, as on CUDA, binary_cross_entropy is refused inside an autocast region.
// Every other op falls through unchanged.
#include <ATen/ATen.h>
#include <ATen/Operators.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

// The op-list macros name ATen types unqualified, as code inside namespace at does.
using namespace at::autocast;
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

Tensor binary_cross_entropy_refused(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are refused inside a tpu autocast "
              "region, as on CUDA: a float16 sigmoid output loses too much precision for them. Use "
              "binary_cross_entropy_with_logits / BCEWithLogitsLoss (which autocasts to float32), or compute "
              "the loss outside the region on float32 inputs.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TT_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TT_AUTOCAST_LOWER)
#undef TT_AUTOCAST_LOWER
#define TT_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TT_AUTOCAST_FP32)
#undef TT_AUTOCAST_FP32
#define TT_AUTOCAST_FP32_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TT_AUTOCAST_FP32_DTYPE)
#undef TT_AUTOCAST_FP32_DTYPE
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define TT_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TT_AUTOCAST_PROMOTE)
#undef TT_AUTOCAST_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace
}  // namespace tt::backend
