// Collectives across the tpu devices of one process as one XLA program of N
// replicas (replica i on the device of tensor i): the stablehlo collective
// runs inside XLA, no host copies. Backs torch_tpu.distributed.spmd.
#pragma once

#include <ATen/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace tt::backend::dist {

struct SpmdCollective {
  // "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "permute".
  std::string kind;
  // Reductions: "sum", "product", "min", "max", "avg" (floats only: sum, then
  // divide by the replica count inside the same program).
  std::string reduce_op = "sum";
  int64_t dim = 0;         // all_gather / reduce_scatter dim; all_to_all split dim
  int64_t concat_dim = 0;  // all_to_all
  std::vector<std::pair<int64_t, int64_t>> pairs;  // permute: (source, target) replica ids
};

// The StableHLO module text for `c` over `n` replicas whose operands are
// `sizes` of `dtype` (raises ValueError/TypeError for bad arguments).
std::string spmd_program_text(const SpmdCollective& c, int64_t n, at::IntArrayRef sizes, at::ScalarType dtype);

// Runs `c` over `tensors` (tensor i on tpu:i of a distinct device each, equal
// shapes and dtypes); returns one result per tensor, on its device.
std::vector<at::Tensor> spmd_run(const SpmdCollective& c, const std::vector<at::Tensor>& tensors);

}  // namespace tt::backend::dist
