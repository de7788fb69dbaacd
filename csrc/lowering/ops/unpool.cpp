// max_unpool2d / max_unpool3d: the inverse of max pooling's scatter.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// max_unpool2d(x, indices, output_size) / max_unpool3d(x, indices,
// output_size, stride, padding): each value written at its flat spatial index
// into zeros (indices are unique when they come from max_pool).
Values max_unpool(Builder& b, const Args& a, const Context& c, int64_t nspatial) {
  const Type& out = c.out();
  Value x = a[0].value(), idx = a[1].value();
  int64_t lead = x.rank() - nspatial;  // N, C or just C
  int64_t rows = 1, in_sp = 1, out_sp = 1;
  for (int64_t i = 0; i < lead; ++i) rows *= x.shape()[i];
  for (int64_t i = lead; i < x.rank(); ++i) in_sp *= x.shape()[i];
  for (int64_t i = lead; i < out.rank(); ++i) out_sp *= out.shape[i];
  int64_t n = rows * in_sp;
  Value flat_idx = b.reshape(b.convert(idx, DType::S64), {n, 1});
  Value row = b.reshape(b.iota(Type{DType::S64, {rows, in_sp}}, 0), {n, 1});
  Value where = b.concatenate({row, flat_idx}, 1);
  Value zeros = b.constant(0, x.dtype(), {rows, out_sp});
  Builder::ScatterDims dn;
  dn.inserted_window_dims = {0, 1};
  dn.scatter_dims_to_operand_dims = {0, 1};
  dn.index_vector_dim = 1;
  Value r = b.scatter(zeros, where, b.reshape(x, {n}), dn);
  return {b.reshape(r, out.shape)};
}

TT_RULE({"aten::max_unpool2d"}, [](Builder& b, const Args& a, const Context& c) { return max_unpool(b, a, c, 2); });
TT_RULE({"aten::max_unpool3d"}, [](Builder& b, const Args& a, const Context& c) { return max_unpool(b, a, c, 3); });

}  // namespace
}  // namespace tt::lowering
