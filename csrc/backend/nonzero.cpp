// nonzero and masked_select: their result size depends on the data, so the
// host reads one count (a synchronisation, as on CUDA), and the rest runs as
// ordinary tpu programs: a stable sort moves the indices of non-zero
// elements to the front, and the first `count` of them are kept.
#include "backend/nonzero.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

// Flat row-major indices of the non-zero elements of `self`, in order.
at::Tensor nonzero_flat(const at::Tensor& self, int64_t* count) {
  at::Tensor flat = self.reshape({-1}).ne(0);
  const int64_t n = flat.numel();
  *count = flat.sum().item<int64_t>();
  at::Tensor ar = at::arange(n, self.options().dtype(at::kLong));
  at::Tensor keys = at::where(flat, ar, ar + n);
  return std::get<0>(keys.sort()).narrow(0, 0, *count);
}

at::Tensor nonzero(const at::Tensor& self) {
  int64_t count = 0;
  at::Tensor idx = nonzero_flat(self, &count);
  std::vector<at::Tensor> coords(self.dim());
  for (int64_t d = self.dim() - 1; d >= 0; --d) {
    coords[d] = idx.remainder(self.size(d));
    idx = idx.div(self.size(d), "floor");
  }
  if (self.dim() == 0) return at::zeros({count, 0}, self.options().dtype(at::kLong));
  return at::stack(coords, 1).contiguous();
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  auto shapes = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor s = self.expand(shapes), m = mask.expand(shapes);
  int64_t count = 0;
  at::Tensor idx = nonzero_flat(m, &count);
  return s.reshape({-1}).index_select(0, idx);
}

}  // namespace

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

namespace {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero);
  m.impl("masked_select", masked_select);
}

}  // namespace
}  // namespace tt::backend
