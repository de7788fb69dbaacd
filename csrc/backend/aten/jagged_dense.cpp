// The two conversions behind jagged-layout nested tensors (NJT, a Python
// subclass over a dense `values` tensor and an `offsets` tensor): padded
// dense <-> jagged values. On tpu they are gathers in ATen ops, each a tpu
// program, with no host read (the padded length is given), except that
// padded -> jagged without total_L reads offsets[-1] as the CPU kernel does.
//
// Contract (as the CPU kernels): one jagged dimension; offsets (B + 1,) are
// nondecreasing from 0; rows of a component past max_length are dropped
// (jagged -> padded) and padded positions are filled with padding_value.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

const at::Tensor& single_offsets(at::TensorList offsets_list, const char* op) {
  TORCH_CHECK(offsets_list.size() == 1, op, "(): only a single jagged dim is supported for now");
  const at::Tensor& offsets = offsets_list[0];
  TORCH_CHECK(offsets.dim() == 1, op, "(): expected 1D offsets, but got offsets.dim() == ", offsets.dim());
  return offsets;
}

at::Tensor jagged_to_padded_dense(const at::Tensor& values, at::TensorList offsets_list,
                                  at::IntArrayRef max_lengths, double padding_value) {
  const at::Tensor& offsets = single_offsets(offsets_list, "_jagged_to_padded_dense_forward");
  TORCH_CHECK(max_lengths.size() == 1, "_jagged_to_padded_dense_forward(): only a single jagged dim is "
              "supported for now");
  const int64_t batch = offsets.size(0) - 1, max_len = max_lengths[0];
  std::vector<int64_t> shape{batch, max_len};
  for (int64_t d = 1; d < values.dim(); ++d) shape.push_back(values.size(d));
  if (values.size(0) == 0 || batch * max_len == 0) return at::full(shape, padding_value, values.options());
  at::Tensor off = offsets.to(at::kLong);
  // Row j of component b is values[offsets[b] + j] where offsets[b] + j < offsets[b + 1].
  at::Tensor pos = off.narrow(0, 0, batch).unsqueeze(1) + at::arange(max_len, off.options()).unsqueeze(0);
  at::Tensor valid = pos < off.narrow(0, 1, batch).unsqueeze(1);
  at::Tensor rows = at::where(valid, pos, at::zeros_like(pos)).reshape({-1});
  at::Tensor gathered = values.index_select(0, rows).reshape(shape);
  std::vector<int64_t> mask_shape{batch, max_len};
  mask_shape.resize(shape.size(), 1);
  return at::where(valid.view(mask_shape), gathered, at::scalar_tensor(padding_value, values.options()));
}

at::Tensor padded_dense_to_jagged(const at::Tensor& dense, at::TensorList offsets_list,
                                  std::optional<int64_t> total_L) {
  const at::Tensor& offsets = single_offsets(offsets_list, "_padded_dense_to_jagged_forward");
  TORCH_CHECK(dense.dim() >= 2, "_padded_dense_to_jagged_forward(): expected a (B, L, ...) dense tensor, got ",
              dense.sizes());
  at::Tensor off = offsets.to(at::kLong);
  const int64_t batch = offsets.size(0) - 1, max_len = dense.size(1);
  const int64_t total = total_L.has_value() ? *total_L : off[-1].item<int64_t>();  // sync, as on the CPU
  std::vector<int64_t> shape{total};
  for (int64_t d = 2; d < dense.dim(); ++d) shape.push_back(dense.size(d));
  if (total == 0 || batch == 0) return at::empty(shape, dense.options());
  // Value t comes from component b = (number of component ends <= t), row t - offsets[b].
  at::Tensor t = at::arange(total, off.options());
  at::Tensor comp = at::searchsorted(off.narrow(0, 1, batch), t, /*out_int32=*/false, /*right=*/true);
  at::Tensor row = t - off.index_select(0, comp);
  std::vector<int64_t> flat{batch * max_len};
  for (int64_t d = 2; d < dense.dim(); ++d) flat.push_back(dense.size(d));
  return dense.reshape(flat).index_select(0, comp * max_len + row).reshape(shape);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_jagged_to_padded_dense_forward", jagged_to_padded_dense);
  m.impl("_padded_dense_to_jagged_forward", padded_dense_to_jagged);
}

}  // namespace
}  // namespace tt::backend
