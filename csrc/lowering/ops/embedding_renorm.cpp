// embedding_renorm(self, indices, max_norm, norm_type): every row of the
// 2-D `self` named in `indices` (each once) whose norm_type-norm exceeds
// max_norm is scaled by max_norm / (norm + 1e-7); other rows are unchanged.
// The backend derives embedding_renorm_ (what F.embedding(max_norm=...)
// calls) from it. Indices out of range are not checked on the device.
#include <cmath>
#include <limits>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// The p-norm of each row of x [N, D] (p = inf, 0, 1, 2 or any other), [N].
Value row_norms(Builder& b, Value x, double p) {
  Value ax = b.abs(x);
  if (std::isinf(p)) return p > 0 ? reduce_max(b, ax, {1}) : reduce_min(b, ax, {1});
  if (p == 0) return reduce_sum(b, b.convert(b.compare(ax, full_like(b, ax, 0), Cmp::NE), x.dtype()), {1});
  if (p == 1) return reduce_sum(b, ax, {1});
  if (p == 2) return b.sqrt(reduce_sum(b, b.mul(x, x), {1}));
  Value powered = b.binary("stablehlo.power", ax, full_like(b, ax, p));
  Value s = reduce_sum(b, powered, {1});
  return b.binary("stablehlo.power", s, full_like(b, s, 1.0 / p));
}

// [N] bool: which rows `indices` names (a scatter of ones, duplicates merge).
Value named_rows(Builder& b, Value indices, int64_t rows) {
  const int64_t k = lowering::numel(indices.shape());
  Value idx = b.reshape(b.convert(indices, DType::S64), {k, 1});
  Builder::ScatterDims dn;
  dn.inserted_window_dims = {0};
  dn.scatter_dims_to_operand_dims = {0};
  dn.index_vector_dim = 1;
  Value hits = b.scatter(b.constant_int(0, DType::S32, {rows}), idx, b.constant_int(1, DType::S32, {k}), dn);
  return b.compare(hits, b.constant_int(0, DType::S32, {rows}), Cmp::NE);
}

TT_RULE({"aten::embedding_renorm"}, [](Builder& b, const Args& a, const Context& c) {
  const Value& self = a[0].value();
  const Value& indices = a[1].value();
  const int64_t rank = static_cast<int64_t>(self.shape().size());
  if (rank != 2)
    throw InvalidArgument("Expected 2-dimensional tensor, but got " + std::to_string(rank) +
                          "-dimensional tensor for argument #1 'self' (while checking arguments for "
                          "embedding_renorm_)");
  if (indices.dtype() != DType::S64 && indices.dtype() != DType::S32)
    throw InvalidArgument("Expected tensor for argument #2 'indices' to have one of the following scalar types: "
                          "Long, Int (while checking arguments for embedding_renorm_)");
  const Type& out = c.out();
  const int64_t rows = out.shape[0], cols = out.shape[1];
  if (rows == 0 || cols == 0 || lowering::numel(indices.shape()) == 0) return Values{self};
  DType t = compute_dtype(out.dtype);
  Value x = b.convert(self, t);
  Value norms = row_norms(b, x, a[3].d);
  Value max_norm = full_like(b, norms, a[2].d);
  Value shrink = b.and_(named_rows(b, indices, rows), b.compare(norms, max_norm, Cmp::GT));
  Value scale = b.select(shrink, b.div(max_norm, b.add(norms, full_like(b, norms, 1e-7))), full_like(b, norms, 1));
  Value scaled = b.mul(x, b.broadcast_in_dim(scale, {rows, cols}, {0}));
  return Values{b.convert(scaled, out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
