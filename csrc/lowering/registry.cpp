#include <map>
#include <mutex>
#include <shared_mutex>

#include "lowering/rule.h"

namespace tt::lowering {

namespace {
// Function-local so that rules registered from other files' static
// initializers never see an unconstructed table.
std::map<std::string, Rule>& table() {
  static std::map<std::string, Rule> t;
  return t;
}
std::map<std::string, Padding>& paddings() {
  static std::map<std::string, Padding> t;
  return t;
}
// Rules are registered from static initializers and, for external ops
// (external_op.h), at run time while other threads may look rules up.
std::shared_mutex& table_mutex() {
  static std::shared_mutex mu;
  return mu;
}
}  // namespace

void register_rule(const std::string& name, Rule rule) {
  std::unique_lock<std::shared_mutex> lock(table_mutex());
  if (table().count(name)) throw std::logic_error("duplicate lowering rule for " + name);
  table()[name] = std::move(rule);
}

const Rule* find_rule(const std::string& name) {
  std::shared_lock<std::shared_mutex> lock(table_mutex());
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> rule_names(bool include_graph_only) {
  std::shared_lock<std::shared_mutex> lock(table_mutex());
  std::vector<std::string> names;
  for (const auto& kv : table())
    if (include_graph_only || !kv.second.graph_only) names.push_back(kv.first);
  return names;
}

void register_padding(const std::string& name, Padding padding) {
  if (paddings().count(name)) throw std::logic_error("duplicate padding facts for " + name);
  paddings()[name] = std::move(padding);
}

const Padding* find_padding(const std::string& name) {
  auto it = paddings().find(name);
  return it == paddings().end() ? nullptr : &it->second;
}

std::vector<std::string> padded_op_names() {
  std::vector<std::string> names;
  for (const auto& kv : paddings()) names.push_back(kv.first);
  return names;
}

std::string source_location(const char* file, int line) {
  std::string f = file ? file : "?";
  size_t at = f.rfind("csrc/");
  return (at == std::string::npos ? f : f.substr(at)) + ":" + std::to_string(line);
}

const Type& Context::out(size_t i) const {
  if (i >= out_types.size()) throw LoweringError(op + ": result type " + std::to_string(i) + " is unknown");
  return out_types[i];
}

}  // namespace tt::lowering
