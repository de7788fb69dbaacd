// `_c10d_functional` collectives inside a whole-graph program of N replicas
// (one per rank; lowering/replicas.h): each becomes its StableHLO collective
// over the replica groups of the c10d group the node names. Graph-only: a
// collective in eager mode goes through its process group, and a graph
// lowered for one device (no replica layout) declines them, so the compiler
// cuts it into program segments around its collectives instead.
//
// Every op works on dim 0, as torch.distributed._functional_collectives
// defines them. Reduce ops: sum, avg (floating types), product, min, max.
#include "lowering/helpers.h"
#include "lowering/replicas.h"

namespace tt::lowering {
namespace {

using Groups = Builder::Groups;

const Groups& groups_of(const Arg& group_name, const char* op) {
  const ReplicaLayout* layout = current_replica_layout();
  if (!layout)
    throw LoweringError(std::string(op) + ": a collective needs a program of one replica per rank "
                        "(the graph is lowered for one device)");
  auto it = layout->groups.find(group_name.s);
  if (it == layout->groups.end())
    throw LoweringError(std::string(op) + ": group '" + group_name.s + "' is not one of the program's replica groups");
  return it->second;
}

const char* combiner(const std::string& reduce_op, DType dtype, const char* op) {
  if (dtype == DType::Pred) throw LoweringError(std::string(op) + ": reductions on bool are not supported");
  if (reduce_op == "sum" || reduce_op == "avg") return "stablehlo.add";
  if (reduce_op == "product") return "stablehlo.multiply";
  if (reduce_op == "min") return "stablehlo.minimum";
  if (reduce_op == "max") return "stablehlo.maximum";
  throw LoweringError(std::string(op) + ": reduce op '" + reduce_op + "' has no in-program form");
}

// AVG is SUM divided by the group size, in the same program.
Value finish_reduce(Builder& b, Value y, const std::string& reduce_op, const Groups& groups, const char* op) {
  if (reduce_op != "avg") return y;
  if (!is_float(y.dtype()) && !is_complex(y.dtype()))
    throw LoweringError(std::string(op) + ": avg needs a floating dtype");
  return b.div(y, b.constant(static_cast<double>(groups[0].size()), y.dtype(), y.shape()));
}

// A 0-d operand travels as [1].
Value at_least_1d(Builder& b, Value x) { return x.rank() == 0 ? b.reshape(x, {1}) : x; }

Value all_reduce_one(Builder& b, Value x, const std::string& reduce_op, const Groups& groups) {
  Value y = b.all_reduce(x, combiner(reduce_op, x.dtype(), "all_reduce"), groups);
  return finish_reduce(b, y, reduce_op, groups, "all_reduce");
}

Value all_gather_one(Builder& b, Value x, const Groups& groups, const Type& out) {
  return b.reshape(b.all_gather(at_least_1d(b, x), 0, groups), out.shape);
}

Value reduce_scatter_one(Builder& b, Value x, const std::string& reduce_op, const Groups& groups, const Type& out) {
  Value x1 = at_least_1d(b, x);
  if (x1.shape()[0] % static_cast<int64_t>(groups[0].size()) != 0)
    throw LoweringError("reduce_scatter_tensor: dim 0 does not divide by the group size");
  Value y = b.reduce_scatter(x1, 0, combiner(reduce_op, x.dtype(), "reduce_scatter_tensor"), groups);
  return b.reshape(finish_reduce(b, y, reduce_op, groups, "reduce_scatter_tensor"), out.shape);
}

TT_GRAPH_RULE({"_c10d_functional::all_reduce"}, [](Builder& b, const Args& a, const Context&) {
  return Values{all_reduce_one(b, a[0].value(), a[1].s, groups_of(a[2], "all_reduce"))};
});

TT_GRAPH_RULE({"_c10d_functional::all_reduce_coalesced"}, [](Builder& b, const Args& a, const Context&) {
  const Groups& groups = groups_of(a[2], "all_reduce_coalesced");
  Values out;
  for (const Value& x : a[0].tensors) out.push_back(all_reduce_one(b, x, a[1].s, groups));
  return out;
});

TT_GRAPH_RULE({"_c10d_functional::all_gather_into_tensor"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{all_gather_one(b, a[0].value(), groups_of(a[2], "all_gather_into_tensor"), c.out())};
});

TT_GRAPH_RULE({"_c10d_functional::all_gather_into_tensor_coalesced"},
              [](Builder& b, const Args& a, const Context& c) {
                const Groups& groups = groups_of(a[2], "all_gather_into_tensor_coalesced");
                Values out;
                for (size_t i = 0; i < a[0].tensors.size(); ++i)
                  out.push_back(all_gather_one(b, a[0].tensors[i], groups, c.out(i)));
                return out;
              });

TT_GRAPH_RULE({"_c10d_functional::reduce_scatter_tensor"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{reduce_scatter_one(b, a[0].value(), a[1].s, groups_of(a[3], "reduce_scatter_tensor"), c.out())};
});

TT_GRAPH_RULE({"_c10d_functional::reduce_scatter_tensor_coalesced"},
              [](Builder& b, const Args& a, const Context& c) {
                const Groups& groups = groups_of(a[3], "reduce_scatter_tensor_coalesced");
                Values out;
                for (size_t i = 0; i < a[0].tensors.size(); ++i)
                  out.push_back(reduce_scatter_one(b, a[0].tensors[i], a[1].s, groups, c.out(i)));
                return out;
              });

// Equal splits only: a program has one text for every replica, and uneven
// split sizes differ from rank to rank (those graphs run in segments, where
// the device transport pads the blocks).
TT_GRAPH_RULE({"_c10d_functional::all_to_all_single"}, [](Builder& b, const Args& a, const Context& c) {
  const Groups& groups = groups_of(a[3], "all_to_all_single");
  Value x = a[0].value();
  const int64_t n = static_cast<int64_t>(groups[0].size());
  auto equal = [&](const std::vector<int64_t>& splits) {
    if (splits.empty()) return true;
    if (static_cast<int64_t>(splits.size()) != n) return false;
    for (int64_t s : splits)
      if (s != splits[0]) return false;
    return true;
  };
  if (!equal(a[1].ints) || !equal(a[2].ints))
    throw LoweringError("all_to_all_single: uneven split sizes have no one-text program for every rank");
  if (x.rank() == 0 || x.shape()[0] % n != 0)
    throw LoweringError("all_to_all_single: dim 0 does not divide by the group size");
  return Values{b.reshape(b.all_to_all(x, 0, 0, groups), c.out().shape)};
});

// broadcast: every replica gathers the group's operands and keeps the
// source's block (`src` is the source's rank within the group, as c10d's
// broadcast reads it).
TT_GRAPH_RULE({"_c10d_functional::broadcast"}, [](Builder& b, const Args& a, const Context& c) {
  const Groups& groups = groups_of(a[2], "broadcast");
  Value x = a[0].value();
  const int64_t place = a[1].i;
  if (place < 0 || place >= static_cast<int64_t>(groups[0].size()))
    throw LoweringError("broadcast: source rank " + std::to_string(place) + " is not in the group");
  Shape one = x.shape();
  one.insert(one.begin(), 1);
  Value gathered = b.all_gather(b.reshape(x, one), 0, groups);
  std::vector<int64_t> start(one.size(), 0), limit = gathered.shape();
  start[0] = place;
  limit[0] = place + 1;
  return Values{b.reshape(b.slice(gathered, start, limit), c.out().shape)};
});

// The collective is done when the program's value exists: waiting is the identity.
TT_GRAPH_RULE({"_c10d_functional::wait_tensor"}, [](Builder&, const Args& a, const Context&) {
  return Values{a[0].value()};
});

}  // namespace
}  // namespace tt::lowering
