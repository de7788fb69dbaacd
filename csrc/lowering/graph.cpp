#include "lowering/graph.h"

#include <algorithm>

#include "lowering/device_check.h"
#include "lowering/helpers.h"
#include "lowering/rule_call.h"

namespace tt::lowering {
namespace {

std::string node_label(const GraphNode& n, size_t index) {
  const char* step = n.step == GraphNode::Step::ReadView ? "view read" : "view write";
  return "node " + std::to_string(index) + " (" + (n.step == GraphNode::Step::Op ? n.op : step) + ")";
}

Value lookup(const std::vector<Value>& vals, int id, const GraphNode& n, size_t index) {
  if (id < 0 || id >= static_cast<int>(vals.size()) || !vals[id].valid())
    throw LoweringError(node_label(n, index) + " reads value " + std::to_string(id) + " before it is defined");
  return vals[id];
}

Value host_constant(Builder& b, const GraphArg& g) {
  switch (g.scalar_kind) {
    case DType::Pred: return b.constant_int(g.b ? 1 : 0, DType::Pred);
    case DType::S64: return b.constant_int(g.i, DType::S64);
    case DType::C128: return b.complex(b.constant(g.d, DType::F64), b.constant(g.imag, DType::F64));
    default: return b.constant(g.d, DType::F64);
  }
}

Arg make_arg(Builder& b, const GraphArg& g, const std::vector<Value>& vals, const GraphNode& n, size_t index) {
  Arg a(g);
  a.contiguous = g.contiguous;
  if (g.kind == Arg::Kind::Tensor) {
    if (g.number) {
      a.tensor = host_constant(b, g);
      a.wrapped = true;
    } else {
      a.tensor = lookup(vals, g.value, n, index);
    }
  } else if (g.kind == Arg::Kind::Scalar) {
    a.tensor = g.value >= 0 ? lookup(vals, g.value, n, index) : host_constant(b, g);
  } else if (g.kind == Arg::Kind::TensorList) {
    for (int id : g.values) a.tensors.push_back(id < 0 ? Value{} : lookup(vals, id, n, index));
  }
  return a;
}

void emit_view_step(Builder& b, const GraphNode& n, size_t index, std::vector<Value>& vals) {
  if (n.out_values.size() != 1 || n.out_values[0] < 0 ||
      n.args.size() != (n.step == GraphNode::Step::WriteView ? 2u : 1u))
    throw LoweringError(node_label(n, index) + ": a view step reads its storage (and value) and makes one value");
  Value storage = lookup(vals, n.args[0].value, n, index);
  vals[n.out_values[0]] = n.step == GraphNode::Step::ReadView
                              ? read_tensor(b, storage, n.dtype, n.view)
                              : write_tensor(b, storage, n.dtype, n.view, lookup(vals, n.args[1].value, n, index));
}

}  // namespace

LoweredGraph lower_graph(const Graph& g) {
  int max_id = static_cast<int>(g.inputs.size()) - 1;
  bool needs_rng = false;
  for (const auto& n : g.nodes) {
    for (int id : n.out_values) max_id = std::max(max_id, id);
    const Rule* r = n.step == GraphNode::Step::Op ? find_rule(n.op) : nullptr;
    needs_rng |= r && r->needs_rng;
  }
  Builder b;
  if (g.replicas.num_replicas > 1) b.set_num_replicas(g.replicas.num_replicas);
  ReplicaLayoutScope replicas(&g.replicas);
  std::vector<Value> vals(static_cast<size_t>(max_id + 1));
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[i] = b.param(g.inputs[i]);
  Value seed, offset;
  if (needs_rng) {
    seed = b.param(Type{DType::U64, {}});
    offset = b.param(Type{DType::U64, {}});
  }

  int64_t counters = 0;
  std::vector<DeviceCheck> checks;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const GraphNode& n = g.nodes[k];
    if (n.step != GraphNode::Step::Op) {
      emit_view_step(b, n, k, vals);
      continue;
    }
    const Rule* rule = find_rule(n.op);
    if (!rule) throw LoweringError(node_label(n, k) + ": no tpu lowering rule");
    if (n.types_known && n.out_values.size() != n.out_types.size())
      throw LoweringError(node_label(n, k) + ": result ids and types differ in number");
    std::vector<bool> masked;
    for (int id : n.out_values) masked.push_back(id < 0);
    Args args;
    for (const auto& ga : n.args) args.push_back(make_arg(b, ga, vals, n, k));
    Context ctx;
    ctx.op = n.op;
    ctx.out_types = n.out_types;
    std::vector<DeviceCheck> node_checks;
    if (device_checks_enabled()) ctx.checks = &node_checks;
    if (rule->needs_rng) {
      // Each random node draws from its own counter range, as consecutive
      // eager ops would.
      ctx.rng_seed = seed;
      ctx.rng_offset = b.add(offset, b.constant_int(counters, DType::U64));
    }
    Values results;
    try {
      results = call_rule(b, *rule, args, ctx, masked, n.types_known);
    } catch (const RuleContractError& e) {
      throw RuleContractError("graph " + node_label(n, k) + ": " + e.what());
    } catch (const LoweringError& e) {
      throw LoweringError(node_label(n, k) + ": " + e.what());
    } catch (const std::exception& e) {
      // Shape errors surface here only for graphs PyTorch already checked,
      // so report them as a lowering problem; the caller runs eagerly.
      throw LoweringError(node_label(n, k) + ": " + e.what());
    }
    for (auto& check : node_checks) {
      check.info.message = n.op + ": " + check.info.message;
      checks.push_back(std::move(check));
    }
    if (!n.types_known) {
      // The rule's own results, masked ones absent, in the order the node
      // names them (an in-place node names only the first).
      std::vector<Value> present;
      for (const auto& r : results)
        if (r.valid()) present.push_back(r);
      size_t named = std::count_if(n.out_values.begin(), n.out_values.end(), [](int id) { return id >= 0; });
      if (present.size() < named)
        throw RuleContractError("graph " + node_label(n, k) + " gave " + std::to_string(present.size()) +
                                " results; " + std::to_string(named) + " were recorded");
      size_t p = 0;
      for (int id : n.out_values)
        if (id >= 0) vals[id] = present[p++];
      if (rule->needs_rng) counters += std::max<int64_t>(n.rng_counters, 0);
      continue;
    }
    int64_t drawn = 0;
    for (size_t j = 0; j < results.size(); ++j) {
      if (masked[j]) continue;
      vals[n.out_values[j]] = results[j];
      drawn += numel(n.out_types[j].shape);
    }
    if (rule->needs_rng) counters += n.rng_counters >= 0 ? n.rng_counters : drawn;
  }

  LoweredGraph out;
  Values results;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    int id = g.outputs[i];
    if (id < 0 || id >= static_cast<int>(vals.size()) || !vals[id].valid())
      throw LoweringError("graph output " + std::to_string(i) + " names undefined value " + std::to_string(id));
    results.push_back(vals[id]);
    out.outputs.push_back(vals[id].type);
  }
  for (const auto& check : checks) out.checks.push_back(check.info);
  if (!checks.empty()) results.push_back(pack_checks(b, checks));
  b.set_results(results);
  for (const auto& [input, output] : g.updates) {
    if (input < 0 || input >= static_cast<int>(g.inputs.size()) || output < 0 ||
        output >= static_cast<int>(out.outputs.size()))
      throw LoweringError("graph update names input " + std::to_string(input) + " and output " +
                          std::to_string(output) + ", which do not exist");
    if (!(g.inputs[input] == out.outputs[output])) continue;
    bool taken = false;
    for (const auto& a : out.aliases) taken = taken || a.first == input || a.second == output;
    if (taken) continue;
    b.alias_param(input, output);
    out.aliases.emplace_back(input, output);
  }
  out.module_text = b.module_text();
  out.needs_rng = needs_rng;
  out.rng_counters = counters;
  return out;
}

}  // namespace tt::lowering
