// Which kernel scaled_dot_product_attention uses on tpu.
//
// PyTorch's composite scaled_dot_product_attention asks the device's
// _fused_sdp_choice_stub; a device without one gets the math path (a dozen
// separate ops forward and more backward). On tpu we answer flash_attention
// for the dense, dropout-free case: for any device other than CUDA the
// composite then calls _scaled_dot_product_flash_attention_for_cpu, whose
// derivative is _scaled_dot_product_flash_attention_for_cpu_backward. Both
// have tensor-only results and PyTorch meta kernels, so each lowers to one
// program through the ordinary lowering table (lowering/ops/attention.cpp).
// (_scaled_dot_product_fused_attention_overrideable, the other way in, returns
// SymInts, which the eager executor does not produce.)
//
// Dropout, a mask that needs a gradient and differing head sizes go to the
// math path, whose ops run natively too.
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>

namespace tt::backend {
namespace {

int64_t tpu_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool /*is_causal*/,
                       std::optional<double> /*scale*/, bool enable_gqa) {
  auto math = static_cast<int64_t>(at::SDPBackend::math);
  if (dropout_p > 0.0) return math;
  if (query.is_nested() || key.is_nested() || value.is_nested()) return math;
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4) return math;
  if (!at::isFloatingType(query.scalar_type())) return math;
  // sym_size, not size: under torch.compile the batch and sequence sizes are
  // symbols, and reading a plain size would make Dynamo specialise all of them.
  // The op's meta kernel shapes the output with the query's head size.
  if (query.sym_size(3) != key.sym_size(3) || key.sym_size(3) != value.sym_size(3)) return math;
  // Heads: equal, or (with enable_gqa) key/value heads dividing query heads.
  c10::SymInt hq = query.sym_size(1), hk = key.sym_size(1);
  if (hk != value.sym_size(1)) return math;
  if (hq != hk && !(enable_gqa && hk > 0 && hq % hk == 0)) return math;
  if (attn_mask && attn_mask->defined() && attn_mask->is_nested()) return math;
  // The flash op has no derivative for its mask; a learned bias (T5's
  // relative position bias) needs the math path's.
  if (attn_mask && attn_mask->defined() && attn_mask->requires_grad()) return math;
  return static_cast<int64_t>(at::SDPBackend::flash_attention);
}

}  // namespace
}  // namespace tt::backend

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &tt::backend::tpu_sdp_choice)
}
