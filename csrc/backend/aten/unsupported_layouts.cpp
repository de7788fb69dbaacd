// Sparse and quantized tpu tensors do not exist: XLA has no sparse or
// quantized buffer types. Every op that would create or use one raises an
// error that says what to do instead, rather than the dispatcher's
// "Could not run ... with arguments from the 'Sparsetpu' backend".
#include <torch/library.h>

namespace tt::backend {
namespace {

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

void sparse_unsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu does not support sparse tensors (", op_name(op),
                              "): keep sparse tensors on the CPU, or call .to_dense() before moving them "
                              "to tpu. For nn.Embedding / nn.EmbeddingBag use sparse=False (the default), "
                              "whose dense gradient runs on tpu.");
}

void quantized_unsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu does not support quantized tensors (", op_name(op),
                              "): call .dequantize() before moving a tensor to tpu, and use bfloat16 or "
                              "float16 (torch.autocast('tpu')) for low-precision compute.");
}

// Dense tpu tensor -> sparse layout.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"_to_sparse", "_to_sparse.sparse_dim", "_to_sparse_csr", "_to_sparse_csc",
                           "_to_sparse_bsr", "_to_sparse_bsc"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized_unsupported>());
}

}  // namespace
}  // namespace tt::backend
