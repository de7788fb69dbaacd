#include <map>
#include <mutex>

#include "lowering/rule.h"

namespace tt::lowering {

namespace {
// Function-local so that rules registered from other files' static
// initializers never see an unconstructed table.
std::map<std::string, Rule>& table() {
  static std::map<std::string, Rule> t;
  return t;
}
}  // namespace

void register_rule(const std::string& name, Rule rule) {
  if (table().count(name)) throw std::logic_error("duplicate lowering rule for " + name);
  table()[name] = std::move(rule);
}

const Rule* find_rule(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> rule_names(bool include_graph_only) {
  std::vector<std::string> names;
  for (const auto& kv : table())
    if (include_graph_only || !kv.second.graph_only) names.push_back(kv.first);
  return names;
}

const Type& Context::out(size_t i) const {
  if (i >= out_types.size()) throw LoweringError(op + ": result type " + std::to_string(i) + " is unknown");
  return out_types[i];
}

}  // namespace tt::lowering
