// Small collectives computed on the host from the agreement exchange
// (backend/dist/agreement_check.h): each rank's slot carries its data next
// to its signature, so after that one gloo all_gather every rank holds every
// rank's data and computes its own result, with no second round trip.
// `rows` is the exchange's [world, capacity] uint8 result; each row holds
// one rank's contiguous data in the wire dtype (host_staging.h).
//
// Numerics: a reduction combines the ranks' values in rank order (0, 1, 2,
// ...), elementwise, in the wire dtype: every rank computes the same bits.
// Over 2 ranks this is exactly gloo's result; over more, floating-point sums
// and products may differ from gloo's ring order in the last bits.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>

namespace tt::backend::dist {

// Whether `op` can be computed here (SUM, PRODUCT, MIN, MAX; PREMUL_SUM is
// SUM by the time it gets here).
bool host_reducible(const c10d::ReduceOp& op);

// Rank r's data: `numel` elements of `dtype` from element `offset` of row r.
at::Tensor row_data(const at::Tensor& rows, int r, at::ScalarType dtype, int64_t offset, int64_t numel);

// Writes into `out` (contiguous, `numel` elements of its dtype) the reduction
// over every row of elements [offset, offset + numel).
void reduce_rows(const at::Tensor& rows, const c10d::ReduceOp& op, int64_t offset, at::Tensor& out);

}  // namespace tt::backend::dist
