#include "backend/pipeline/index_arguments.h"

#include <ATen/ATen.h>

namespace tt::backend {

void indices_to_device(const at::Tensor& self, c10::IValue& indices) {
  if (!indices.isList()) return;
  bool any = false;
  auto on_cpu = [](const c10::IValue& e) {
    return e.isTensor() && e.toTensor().defined() && e.toTensor().device().is_cpu();
  };
  for (const c10::IValue& e : indices.toListRef()) any |= on_cpu(e);
  if (!any) return;
  c10::List<std::optional<at::Tensor>> out;
  for (const c10::IValue& e : indices.toListRef()) {
    if (!e.isTensor() || !e.toTensor().defined()) out.push_back(std::nullopt);
    else if (on_cpu(e)) out.push_back(e.toTensor().to(self.device()));
    else out.push_back(e.toTensor());
  }
  indices = out;
}

bool expand_bool_indices(const at::Tensor& self, c10::IValue& indices) {
  if (!indices.isList()) return false;
  bool any = false;
  for (const c10::IValue& e : indices.toListRef())
    if (e.isTensor() && (e.toTensor().scalar_type() == at::kBool || e.toTensor().scalar_type() == at::kByte))
      any = true;
  if (!any) return false;
  c10::List<std::optional<at::Tensor>> out;
  int64_t dim = 0;  // the dim of `self` the next index applies to
  for (const c10::IValue& e : indices.toListRef()) {
    if (!e.isTensor()) {
      out.push_back(std::nullopt);
      ++dim;
      continue;
    }
    const at::Tensor& t = e.toTensor();
    if (t.scalar_type() != at::kBool && t.scalar_type() != at::kByte) {
      out.push_back(t);
      ++dim;
      continue;
    }
    TORCH_CHECK_INDEX(dim + t.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim());
    for (int64_t d = 0; d < t.dim(); ++d)
      TORCH_CHECK_INDEX(t.size(d) == self.size(dim + d), "The shape of the mask ", t.sizes(), " at index ", d,
                        " does not match the shape of the indexed tensor ", self.sizes(), " at index ", dim + d);
    dim += t.dim();
    // A k-d mask stands for k integer index tensors over the dims it covers.
    at::Tensor nz = at::nonzero(t);
    for (int64_t d = 0; d < t.dim(); ++d) out.push_back(nz.select(1, d));
  }
  indices = out;
  return true;
}

}  // namespace tt::backend
