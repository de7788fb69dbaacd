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
  GraphExecutable(const lowering::Graph& g, std::string name);

  // Runs on `inputs` (tpu tensors of the declared dtypes and shapes, any
  // layout; CPU tensors are uploaded) and returns new contiguous tpu tensors.
  // An input the graph updates (Graph::updates) that is all of its storage
  // takes its new value at once (its storage is rebound to the result), and
  // its old buffer is donated to the program when nothing else holds it.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  const std::string& module_text() const { return text_; }
  double compile_seconds() const { return compile_seconds_; }
  int64_t num_inputs() const { return static_cast<int64_t>(inputs_.size()); }

 private:
  runtime::ExecutablePtr executable() const;

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
};

}  // namespace tt::backend
