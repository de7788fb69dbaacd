// torch._assert_async(t[, msg]): the host reads the one value (a
// synchronisation; XLA programs have no device-side assertion, so the check
// cannot stay on the device as CUDA's does). Same checks and messages as
// PyTorch's CPU kernels: one element, nonzero, else RuntimeError(msg).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string_view>

namespace tt::backend {
namespace {

void assert_async(const at::Tensor& self) {
  TORCH_CHECK(at::is_nonzero(self), "Expected Tensor with single nonzero value, but got zero");
}

void assert_async_msg(const at::Tensor& self, std::string_view msg) {
  TORCH_CHECK(at::is_nonzero(self), !msg.empty() ? msg : std::string_view("Assertion is failed"));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", assert_async);
  m.impl("_assert_async.msg", assert_async_msg);
}

}  // namespace
}  // namespace tt::backend
