// Whole-graph lowering: a straight-line graph of ATen ops (a torch.compile FX
// graph, or a fused-eager cluster) becomes one StableHLO module, each node
// emitted by the same rule eager mode uses for that op.
#pragma once

#include <string>
#include <vector>

#include "lowering/rule.h"

namespace tt::lowering {

// Values are numbered: the graph's inputs are 0..inputs.size()-1, and each
// node names the ids of its results.
struct GraphArg {
  Arg::Kind kind = Arg::Kind::None;
  // Tensor: the value id; -1 with `number` set for a Python number given
  // where the schema has a Tensor (it promotes like a wrapped number).
  int value = -1;
  bool number = false;
  std::vector<int> values;  // TensorList: ids, -1 for a None entry
  // Scalar / number: kind and host value; other kinds: as in Arg.
  DType scalar_kind = DType::F64;
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<bool> bools;
  std::string s;
};

struct GraphNode {
  std::string op;                // functional overload, "aten::add.Tensor"
  std::vector<GraphArg> args;    // in schema order, defaults filled in
  std::vector<Type> out_types;   // flattened results (a masked one: any type)
  std::vector<int> out_values;   // value id per flattened result; -1 = masked off
};

struct Graph {
  std::vector<Type> inputs;
  std::vector<GraphNode> nodes;
  std::vector<int> outputs;      // value ids, in order
};

struct LoweredGraph {
  std::string module_text;
  std::vector<Type> outputs;
  // Random ops read (seed, offset) from the two parameters after the inputs;
  // each run advances the generator by rng_counters.
  bool needs_rng = false;
  int64_t rng_counters = 0;
};

// Throws LoweringError naming the node when an op has no rule or its rule
// declines these arguments.
LoweredGraph lower_graph(const Graph& g);

}  // namespace tt::lowering
