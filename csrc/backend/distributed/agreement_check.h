// Before a collective moves data, the ranks of a tpu_dist group exchange a
// small signature of what each passes (collective, root, dtype, shapes,
// all_to_all splits) and all raise the same clear error when they differ.
// Gloo itself aborts the process on a size mismatch (a gloo::EnforceNotMet
// thrown on its transport thread), so the check must come first.
// The exchange is one gloo all_to_all of fixed-size blocks: the block a
// rank sends to each peer holds its signature, then room for data, so that
// a small collective needs no second round trip (the caller computes its
// result from the data it received, see backend/distributed/inline_collectives.h).
// An all_to_all, not an all_gather: gloo posts every peer's send and receive
// at once, where its all_gather is a ring of world - 1 steps; with ranks
// sharing cores each step waits for a peer to be scheduled.
// TORCH_TPU_DIST_CHECK=0 skips it (one gloo collective per collective).
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tt::backend::dist {

struct Signature {
  const char* op = "";             // the collective's name (same pointer on every rank)
  int64_t root = -1;               // root rank, -1 for rootless collectives
  std::vector<at::Tensor> tensors; // whose dtypes and shapes must agree
  int64_t reduce_op = -1;          // c10d::ReduceOp::RedOpType, -1 where none
  // all_to_all_single: rows each rank sends to / receives from each rank
  // (empty otherwise); rank i's send[j] must equal rank j's recv[i].
  std::vector<int64_t> send_splits, recv_splits;
};

// Whether the check runs (read once from TORCH_TPU_DIST_CHECK).
bool agreement_check_enabled();

// What a rank sends in the exchange besides its signature: nothing, the
// same bytes to every rank (`split_bytes` 0), or `split_bytes` to each rank in
// turn (rank j gets bytes [j * split_bytes, (j + 1) * split_bytes) of `data`,
// cut short or empty past its end).
struct ExchangeData {
  at::Tensor data;          // contiguous CPU tensor, or undefined for none
  int64_t split_bytes = 0;  // 0: `data` whole to every rank
  // The most bytes one block carries (what must fit the capacity).
  int64_t block_bytes() const;
};

// Exchanges `mine` over `gloo` (waiting at most `timeout`) and raises on
// every rank when the ranks disagree, naming each rank's arguments. `what`
// names the collective and this rank for the error when a peer never
// answers (it died or called nothing); `on_failure` then adds to the
// message (the ranks that did not reach it).
// Each block carries `capacity` bytes of data after the signature
// (`capacity` must be the same on every rank, a multiple of 8, at least
// `data.block_bytes()`). Returns a [world, capacity] uint8 tensor whose row r
// starts with the data rank r sent to this rank (bytes past it unspecified).
at::Tensor agree(c10d::Backend& gloo, const Signature& mine, const ExchangeData& data, int64_t capacity,
                 std::chrono::milliseconds timeout, const std::string& what,
                 const std::function<std::string()>& on_failure);

}  // namespace tt::backend::dist
