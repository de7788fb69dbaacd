// The replicas a whole-graph program runs as: a torch.compile graph whose
// `_c10d_functional` collectives become StableHLO collectives inside the one
// program (torch_tpu/compiler/replicated_graph.py). Each replica is one rank;
// the collective rules (ops/collectives.cpp) read which replicas the c10d
// group named in a node spans.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tt::lowering {

struct ReplicaLayout {
  int num_replicas = 1;  // 1: a one-device program, no collective rule applies
  // c10d group name -> replica groups (a partition of 0..num_replicas-1).
  std::map<std::string, std::vector<std::vector<int64_t>>> groups;
};

// The layout of the graph this thread is lowering; null outside lower_graph
// and for a one-device graph.
const ReplicaLayout* current_replica_layout();

// Makes `layout` current on this thread for its lifetime.
class ReplicaLayoutScope {
 public:
  explicit ReplicaLayoutScope(const ReplicaLayout* layout);
  ~ReplicaLayoutScope();
  ReplicaLayoutScope(const ReplicaLayoutScope&) = delete;
  ReplicaLayoutScope& operator=(const ReplicaLayoutScope&) = delete;

 private:
  const ReplicaLayout* previous_;
};

}  // namespace tt::lowering
