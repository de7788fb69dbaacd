// torch.equal: a Python bool, so the host reads one value (a
// synchronisation, as on CUDA); the comparison itself is a tpu program.
// Same sizes and every element equal after type promotion (NaN != NaN), as
// PyTorch's CPU kernel decides.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("equal", equal); }

}  // namespace
}  // namespace tt::backend
