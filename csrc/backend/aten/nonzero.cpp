// nonzero and masked_select: their result size depends on the data, so the
// host reads one count (a synchronisation, as on CUDA), and the rest runs as
// ordinary tpu programs: a stable sort moves the indices of non-zero
// elements to the front, and the first `count` of them are kept.
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

namespace {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero);
  m.impl("masked_select", masked_select);
}

}  // namespace
}  // namespace tt::backend
