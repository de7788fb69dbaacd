#include "lowering/replicas.h"

namespace tt::lowering {
namespace {
thread_local const ReplicaLayout* t_layout = nullptr;
}  // namespace

const ReplicaLayout* current_replica_layout() { return t_layout; }

ReplicaLayoutScope::ReplicaLayoutScope(const ReplicaLayout* layout) : previous_(t_layout) {
  t_layout = layout && layout->num_replicas > 1 ? layout : nullptr;
}

ReplicaLayoutScope::~ReplicaLayoutScope() { t_layout = previous_; }

}  // namespace tt::lowering
