// Collectives computed on the host from the agreement exchange
// (backend/distributed/agreement_check.h): each rank's blocks carry its data next
// to its signature, so after that one gloo all_to_all every rank holds what
// it needs and computes its own result, with no second round trip (an
// all_reduce of more than 64 KiB takes one more: it reduces one share per
// rank, then all-gathers the reduced shares).
// `rows` is the exchange's [world, capacity] uint8 result; row r holds the
// block rank r sent here, contiguous data in the wire dtype (host_staging.h).
//
// Numerics: a reduction combines the ranks' values in rank order (0, 1, 2,
// ...), elementwise, in the wire dtype, each element on one rank only or on
// every rank alike: every rank gets the same bits. Over 2 ranks this is
// exactly gloo's result; over more, floating-point sums and products may
// differ from gloo's ring order in the last bits.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>

namespace tt::backend::dist {

// Whether `op` can be computed here (SUM, PRODUCT, MIN, MAX; PREMUL_SUM is
// SUM by the time it gets here).
bool host_reducible(const c10d::ReduceOp& op);

// The block rank r sent: its first `numel` elements of `dtype`.
at::Tensor row_data(const at::Tensor& rows, int r, at::ScalarType dtype, int64_t numel);

// Writes into `out` (contiguous, of its dtype) the reduction over every row
// of its first out.numel() elements.
void reduce_rows(const at::Tensor& rows, const c10d::ReduceOp& op, at::Tensor& out);

}  // namespace tt::backend::dist
