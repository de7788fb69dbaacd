// bincount: its result length (max(input) + 1, at least minlength) depends on
// the data, so the host reads the input's min and max (one synchronisation,
// as on CUDA); the counting is an index_add on tpu. Result dtypes and
// errors are PyTorch's CPU ones: int64 counts, float32 sums for float32
// weights, float64 for any other weights.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  const at::Tensor weights = weights_opt.value_or(at::Tensor());
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  const bool has_weights = weights.defined();
  TORCH_CHECK(!has_weights || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  const at::ScalarType out_type =
      !has_weights ? at::kLong : weights.scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  auto options = self.options().dtype(out_type);
  if (self.numel() == 0) return at::zeros({minlength}, options);
  at::Tensor bounds = at::stack({self.min(), self.max()}).to(at::kLong).cpu();
  TORCH_CHECK(bounds[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
  const int64_t bins = std::max(bounds[1].item<int64_t>() + 1, minlength);
  at::Tensor values = has_weights ? weights.to(out_type) : at::ones({self.size(0)}, options);
  return at::zeros({bins}, options).index_add_(0, self.to(at::kLong), values);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("bincount", bincount); }

}  // namespace
}  // namespace tt::backend
