// Before a collective moves data, the ranks of a tpu_dist group exchange a
// small signature of what each passes (collective, root, dtype, shapes,
// all_to_all splits) and all raise the same clear error when they differ.
// Gloo itself aborts the process on a size mismatch (a gloo::EnforceNotMet
// thrown on its transport thread), so the check must come first.
// TORCH_TPU_DIST_CHECK=0 skips it (one small allgather per collective).
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
  // all_to_all_single: rows each rank sends to / receives from each rank
  // (empty otherwise); rank i's send[j] must equal rank j's recv[i].
  std::vector<int64_t> send_splits, recv_splits;
};

// Whether the check runs (read once from TORCH_TPU_DIST_CHECK).
bool agreement_check_enabled();

// Exchanges `mine` over `gloo` (waiting at most `timeout`) and raises on
// every rank when the ranks disagree, naming each rank's arguments. `what`
// names the collective and this rank for the error when a peer never
// answers (it died or called nothing); `on_failure` then adds to the
// message (the ranks that did not reach it).
void agree(c10d::Backend& gloo, const Signature& mine, std::chrono::milliseconds timeout,
           const std::string& what, const std::function<std::string()>& on_failure);

}  // namespace tt::backend::dist
