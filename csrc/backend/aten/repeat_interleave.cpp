// repeat_interleave.Tensor(repeats, output_size): index i repeated
// repeats[i] times. The result length is sum(repeats), read on the host
// together with the smallest repeat (one synchronisation, as on CUDA)
// unless output_size gives it; the indices come from a searchsorted of
// arange(total) in the running sum, on tpu. Errors are PyTorch's CPU ones.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

at::Tensor repeat_interleave(const at::Tensor& repeats, std::optional<int64_t> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK_NOT_IMPLEMENTED(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
                              "\"repeat_interleave_cpu\" not implemented for '",
                              c10::toString(repeats.scalar_type()), "'");
  if (repeats.size(0) == 0) return at::empty({0}, repeats.options());
  at::Tensor ends = repeats.cumsum(0, at::kLong);
  int64_t total = 0;
  if (output_size) {
    total = *output_size;  // trusted, as on CUDA: no host read, no check
  } else {
    at::Tensor host = at::stack({repeats.min().to(at::kLong), ends[-1]}).cpu();
    TORCH_CHECK(host[0].item<int64_t>() >= 0, "repeats can not be negative");
    total = host[1].item<int64_t>();
  }
  at::Tensor positions = at::arange(total, repeats.options().dtype(at::kLong));
  return at::searchsorted(ends, positions, /*out_int32=*/repeats.scalar_type() == at::kInt, /*right=*/true);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("repeat_interleave.Tensor", repeat_interleave); }

}  // namespace
}  // namespace tt::backend
