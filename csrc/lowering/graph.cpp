#include "lowering/graph.h"

#include <algorithm>

#include "lowering/helpers.h"
#include "lowering/rule_call.h"

namespace tt::lowering {
namespace {

std::string node_label(const GraphNode& n, size_t index) {
  return "node " + std::to_string(index) + " (" + n.op + ")";
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
    default: return b.constant(g.d, DType::F64);
  }
}

Arg make_arg(Builder& b, const GraphArg& g, const std::vector<Value>& vals, const GraphNode& n, size_t index) {
  Arg a;
  a.kind = g.kind;
  a.scalar_kind = g.scalar_kind;
  a.i = g.i;
  a.d = g.d;
  a.b = g.b;
  a.ints = g.ints;
  a.doubles = g.doubles;
  a.bools = g.bools;
  a.s = g.s;
  if (g.kind == Arg::Kind::Tensor) {
    if (g.number) {
      a.tensor = host_constant(b, g);
      a.wrapped = true;
    } else {
      a.tensor = lookup(vals, g.value, n, index);
    }
  } else if (g.kind == Arg::Kind::Scalar) {
    a.tensor = host_constant(b, g);
  } else if (g.kind == Arg::Kind::TensorList) {
    for (int id : g.values) a.tensors.push_back(id < 0 ? Value{} : lookup(vals, id, n, index));
  }
  return a;
}

}  // namespace

LoweredGraph lower_graph(const Graph& g) {
  int max_id = static_cast<int>(g.inputs.size()) - 1;
  bool needs_rng = false;
  for (const auto& n : g.nodes) {
    for (int id : n.out_values) max_id = std::max(max_id, id);
    const Rule* r = find_rule(n.op);
    needs_rng |= r && r->needs_rng;
  }
  Builder b;
  std::vector<Value> vals(static_cast<size_t>(max_id + 1));
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[i] = b.param(g.inputs[i]);
  Value seed, offset;
  if (needs_rng) {
    seed = b.param(Type{DType::U64, {}});
    offset = b.param(Type{DType::U64, {}});
  }

  int64_t counters = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const GraphNode& n = g.nodes[k];
    const Rule* rule = find_rule(n.op);
    if (!rule) throw LoweringError(node_label(n, k) + ": no tpu lowering rule");
    if (n.out_values.size() != n.out_types.size())
      throw LoweringError(node_label(n, k) + ": result ids and types differ in number");
    std::vector<bool> masked;
    for (int id : n.out_values) masked.push_back(id < 0);
    Args args;
    for (const auto& ga : n.args) args.push_back(make_arg(b, ga, vals, n, k));
    Context ctx;
    ctx.op = n.op;
    ctx.out_types = n.out_types;
    if (rule->needs_rng) {
      // Each random node draws from its own counter range, as consecutive
      // eager ops would.
      ctx.rng_seed = seed;
      ctx.rng_offset = b.add(offset, b.constant_int(counters, DType::U64));
    }
    Values results;
    try {
      results = call_rule(b, *rule, args, ctx, masked);
    } catch (const RuleContractError& e) {
      throw RuleContractError("graph " + node_label(n, k) + ": " + e.what());
    } catch (const LoweringError& e) {
      throw LoweringError(node_label(n, k) + ": " + e.what());
    } catch (const std::exception& e) {
      // Shape errors surface here only for graphs PyTorch already checked,
      // so report them as a lowering problem; the caller runs eagerly.
      throw LoweringError(node_label(n, k) + ": " + e.what());
    }
    for (size_t j = 0; j < results.size(); ++j) {
      if (masked[j]) continue;
      vals[n.out_values[j]] = results[j];
      if (rule->needs_rng) counters += numel(n.out_types[j].shape);
    }
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
  b.set_results(results);
  out.module_text = b.module_text();
  out.needs_rng = needs_rng;
  out.rng_counters = counters;
  return out;
}

}  // namespace tt::lowering
