// Whole-graph lowering: a straight-line graph of ATen ops (a torch.compile FX
// graph, or a fused-eager cluster) becomes one StableHLO module, each node
// emitted by the same rule eager mode uses for that op (through call_rule).
// A fused cluster's graph also reads its inputs' views and writes in-place
// results back into storages, with view steps.
#pragma once

#include <string>
#include <vector>

#include "lowering/replicas.h"
#include "lowering/rule.h"
#include "lowering/view.h"

namespace tt::lowering {

// Values are numbered: the graph's inputs are 0..inputs.size()-1, and each
// node names the ids of its results.
// A node's argument: the host fields, and which values it reads.
struct GraphArg : HostArg {
  // Tensor: the value id; -1 with `number` set for a Python number given
  // where the schema has a Tensor (a constant of its host value, which
  // promotes like a wrapped number).
  // Scalar: the id of its runtime value, or -1 for a constant of its host
  // value.
  int value = -1;
  bool number = false;
  std::vector<int> values;  // TensorList: ids, -1 for a None entry
  bool contiguous = true;   // Tensor: as Arg::contiguous
};

struct GraphNode {
  // Op: one ATen call. ReadView: the tensor of `dtype` seen through `view`
  // in the storage value args[0]. WriteView: the storage args[0] with the
  // value args[1] written through `view` (an in-place op's write-back).
  enum class Step { Op, ReadView, WriteView };
  Step step = Step::Op;
  std::string op;                // functional overload, "aten::add.Tensor"
  std::vector<GraphArg> args;    // in schema order, defaults filled in
  std::vector<Type> out_types;   // flattened results (a masked one: any type)
  std::vector<int> out_values;   // value id per flattened result; -1 = masked off
  // Op: false when PyTorch gave no result types (no meta kernel); out_types
  // is then empty and the rule's results are taken as it makes them.
  bool types_known = true;
  // Op with a random rule: how far the generator advances (-1: by the
  // element count of its results).
  int64_t rng_counters = -1;
  View view;                     // ReadView / WriteView
  DType dtype = DType::F32;
};

struct Graph {
  std::vector<Type> inputs;
  std::vector<GraphNode> nodes;
  std::vector<int> outputs;      // value ids, in order
  // (input, output): output `output` is the new value of input `input` (an
  // input the graph mutates). The program may update that input's buffer in
  // place: its parameter is aliased to the result when their types agree.
  std::vector<std::pair<int, int>> updates;
  // A program of one replica per rank, whose collective nodes are StableHLO
  // collectives over these replica groups (lowering/replicas.h); the
  // default is a one-device program.
  ReplicaLayout replicas;
};

struct LoweredGraph {
  std::string module_text;
  std::vector<Type> outputs;
  // Random ops read (seed, offset) from the two parameters after the inputs;
  // each run advances the generator by rng_counters.
  bool needs_rng = false;
  int64_t rng_counters = 0;
  // The nodes' device checks (messages prefixed with their op): when there
  // are any, the program returns one s64[2n] result after `outputs`.
  std::vector<CheckInfo> checks;
  // The (input, output) pairs of Graph::updates whose parameter is aliased
  // to its result (a run may donate those inputs' buffers).
  std::vector<std::pair<int, int>> aliases;
};

// Throws LoweringError naming the node when an op has no rule or its rule
// declines these arguments.
LoweredGraph lower_graph(const Graph& g);

}  // namespace tt::lowering
