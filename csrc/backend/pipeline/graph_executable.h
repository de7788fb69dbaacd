// One lowered torch.compile FX graph: its StableHLO program, whose executable
// lives in the program runner's cache (compiled again if it was evicted), run
// on tpu tensors.
#pragma once

#include <ATen/Tensor.h>

#include <string>
#include <vector>

#include "backend/pipeline/program_runner.h"
#include "lowering/graph.h"
#include "runtime/runtime.h"

namespace tt::backend {

class GraphExecutable {
 public:
  // Lowers and compiles `g`; `name` labels errors. Throws
  // lowering::LoweringError when a node cannot be lowered, c10::Error when
  // XLA refuses the program.
  //
  // With `replica_devices`, one replica per device (g.replicas names the
  // replica groups of its collectives): the program runs through
  // run_replicated, replica r on replica_devices[r]. Such a graph updates no
  // input in place and draws no random numbers (LoweringError).
  GraphExecutable(const lowering::Graph& g, std::string name, std::vector<int> replica_devices = {});

  // Runs on `inputs` (tpu tensors of the declared dtypes and shapes, any
  // layout; CPU tensors are uploaded) and returns new contiguous tpu tensors.
  // An input the graph updates (Graph::updates) that is all of its storage
  // takes its new value at once (its storage is rebound to the result), and
  // its old buffer is donated to the program when nothing else holds it.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  // A replicated program: replica r's inputs (on replica_devices[r], or CPU
  // tensors, uploaded there) in, replica r's results out, one launch.
  std::vector<std::vector<at::Tensor>> run_replicated(const std::vector<std::vector<at::Tensor>>& inputs) const;

  const std::string& module_text() const { return text_; }
  double compile_seconds() const { return compile_seconds_; }
  int64_t num_inputs() const { return static_cast<int64_t>(inputs_.size()); }
  const std::vector<int>& replica_devices() const { return replica_devices_; }

 private:
  runtime::ExecutablePtr executable() const;
  runtime::BufferPtr input_buffer(const at::Tensor& t, size_t i, int device) const;

  std::string name_;
  std::string text_;
  std::string key_, what_;
  runtime::CompileOverrides overrides_;  // those current when it was built; a recompile keeps them
  CheckList checks_;
  std::vector<hlo::Type> inputs_, outputs_;
  std::vector<std::pair<int, int>> aliases_;  // (input, output) updated in place
  bool needs_rng_ = false;
  int64_t rng_counters_ = 0;
  double compile_seconds_ = 0;
  std::vector<int> replica_devices_;  // empty: a one-device program
};

}  // namespace tt::backend
