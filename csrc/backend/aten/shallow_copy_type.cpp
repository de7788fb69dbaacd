// `param.data = tensor` across cpu and tpu (Variable::set_data), as between
// cpu and cuda. c10's TensorImpl::has_compatible_shallow_copy_type lists the
// in-tree dense backends only, so without this a PrivateUse1 tensor could
// take the data of nothing but another tpu tensor; FSDP2's fully_shard moves
// a CPU-built module with `tensor.data = tensor.to(device)`.
//
// A tpu tensor is a plain TensorImpl (dense, strided, a storage), so a dense
// cpu or tpu tensor can take its metadata and storage, and it theirs:
// shallow_copy_from copies the key set, device, storage and geometry.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

bool IsDenseCpuOrTpu(const at::Tensor& t) {
  return t.layout() == at::kStrided && !t.is_quantized() &&
         (t.device().is_cpu() || t.device().is_privateuseone()) &&
         t.key_set().has_any(c10::DispatchKeySet(c10::DispatchKey::Dense));
}

bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return IsDenseCpuOrTpu(self) && IsDenseCpuOrTpu(from);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", HasCompatibleShallowCopyType);
}

}  // namespace
}  // namespace tt::backend
