#include "backend/distributed/inline_collectives.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace tt::backend::dist {

bool host_reducible(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: case c10d::ReduceOp::PRODUCT: case c10d::ReduceOp::MIN: case c10d::ReduceOp::MAX:
      return true;
    default:
      return false;
  }
}

at::Tensor row_data(const at::Tensor& rows, int r, at::ScalarType dtype, int64_t numel) {
  if (numel == 0) return at::empty({0}, rows.options().dtype(dtype));  // rows may be [world, 0]
  const int64_t esize = static_cast<int64_t>(c10::elementSize(dtype));
  TORCH_CHECK(numel * esize <= rows.size(1), "tpu_dist: inline data past its slot");
  return rows[r].narrow(0, 0, numel * esize).view(dtype);
}

void reduce_rows(const at::Tensor& rows, const c10d::ReduceOp& op, at::Tensor& out) {
  const int world = static_cast<int>(rows.size(0));
  const at::ScalarType dtype = out.scalar_type();
  const int64_t numel = out.numel();
  at::Tensor acc = out.view({numel});
  if (world == 1) {
    acc.copy_(row_data(rows, 0, dtype, numel));
    return;
  }
  // acc = row 0 (op) row 1, then acc = acc (op) row r: one pass per rank.
  const bool is_bool = dtype == at::kBool;
  at::Tensor a = row_data(rows, 0, dtype, numel);
  for (int r = 1; r < world; ++r) {
    at::Tensor x = row_data(rows, r, dtype, numel);
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
        is_bool ? at::logical_or_out(acc, a, x) : at::add_out(acc, a, x);
        break;
      case c10d::ReduceOp::PRODUCT:
        is_bool ? at::logical_and_out(acc, a, x) : at::mul_out(acc, a, x);
        break;
      case c10d::ReduceOp::MIN:
        is_bool ? at::logical_and_out(acc, a, x) : at::minimum_out(acc, a, x);
        break;
      case c10d::ReduceOp::MAX:
        is_bool ? at::logical_or_out(acc, a, x) : at::maximum_out(acc, a, x);
        break;
      default:
        TORCH_CHECK(false, "tpu_dist: reduction ", static_cast<int>(op.op_), " has no host form");
    }
    a = acc;
  }
}

}  // namespace tt::backend::dist
