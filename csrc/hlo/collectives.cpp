// torch_tpu hlo layer: StableHLO collectives across replicas (all_reduce,
// all_gather, reduce_scatter, all_to_all, collective_permute). The module's
// num_replicas (Builder::set_num_replicas) says how many replicas there are.
#include <set>
#include <string>

#include "hlo/builder.h"

namespace tt::hlo {
namespace {

// Checks that `groups` partitions 0..num_replicas-1 into rows of one size;
// returns that size.
int64_t check_groups(const char* op, const Builder::Groups& groups, int num_replicas) {
  if (groups.empty() || groups[0].empty()) throw BuildError(std::string(op) + ": no replica groups");
  std::set<int64_t> seen;
  for (const auto& g : groups) {
    if (g.size() != groups[0].size())
      throw BuildError(std::string(op) + ": replica groups of different sizes");
    for (int64_t r : g) {
      if (r < 0 || r >= num_replicas || !seen.insert(r).second)
        throw BuildError(std::string(op) + ": replica " + std::to_string(r) +
                         " is out of range or in two groups (num_replicas " + std::to_string(num_replicas) + ")");
    }
  }
  return static_cast<int64_t>(groups[0].size());
}

// dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
std::string matrix_attr(const std::vector<std::vector<int64_t>>& rows) {
  std::string s = "dense<[";
  for (size_t i = 0; i < rows.size(); ++i) {
    s += i ? ", [" : "[";
    for (size_t j = 0; j < rows[i].size(); ++j) s += (j ? ", " : "") + std::to_string(rows[i][j]);
    s += "]";
  }
  return s + "]> : tensor<" + std::to_string(rows.size()) + "x" + std::to_string(rows[0].size()) + "xi64>";
}

std::string group_attrs(const Builder::Groups& groups, int64_t channel) {
  std::string s = "replica_groups = " + matrix_attr(groups);
  if (channel > 0) s += ", channel_handle = #stablehlo.channel_handle<handle = " + std::to_string(channel) + ", type = 1>";
  return s;
}

void check_dim(const char* op, const Value& x, int64_t dim) {
  if (dim < 0 || dim >= x.rank())
    throw BuildError(std::string(op) + ": dimension " + std::to_string(dim) + " is out of range for " + x.type.str());
}

}  // namespace

Value Builder::all_reduce(Value x, const std::string& op, const Groups& groups, int64_t channel) {
  check_groups("stablehlo.all_reduce", groups, num_replicas_);
  Type scalar{x.dtype(), {}};
  std::string r = region({scalar, scalar}, [&](Builder& b, const Values& a) {
    return Values{b.binary(op, a[0], a[1])};
  });
  return emit1("stablehlo.all_reduce", {x}, x.type, group_attrs(groups, channel), {r});
}

Value Builder::all_gather(Value x, int64_t dim, const Groups& groups, int64_t channel) {
  int64_t n = check_groups("stablehlo.all_gather", groups, num_replicas_);
  check_dim("stablehlo.all_gather", x, dim);
  Type out = x.type;
  out.shape[dim] *= n;
  return emit1("stablehlo.all_gather", {x}, out,
               "all_gather_dim = " + std::to_string(dim) + " : i64, " + group_attrs(groups, channel));
}

Value Builder::reduce_scatter(Value x, int64_t dim, const std::string& op, const Groups& groups,
                              int64_t channel) {
  int64_t n = check_groups("stablehlo.reduce_scatter", groups, num_replicas_);
  check_dim("stablehlo.reduce_scatter", x, dim);
  if (x.shape()[dim] % n)
    throw BuildError("stablehlo.reduce_scatter: dimension " + std::to_string(dim) + " of " + x.type.str() +
                     " does not divide by the group size " + std::to_string(n));
  Type out = x.type;
  out.shape[dim] /= n;
  Type scalar{x.dtype(), {}};
  std::string r = region({scalar, scalar}, [&](Builder& b, const Values& a) {
    return Values{b.binary(op, a[0], a[1])};
  });
  return emit1("stablehlo.reduce_scatter", {x}, out,
               "scatter_dimension = " + std::to_string(dim) + " : i64, " + group_attrs(groups, channel), {r});
}

Value Builder::all_to_all(Value x, int64_t split_dim, int64_t concat_dim, const Groups& groups,
                          int64_t channel) {
  int64_t n = check_groups("stablehlo.all_to_all", groups, num_replicas_);
  check_dim("stablehlo.all_to_all", x, split_dim);
  check_dim("stablehlo.all_to_all", x, concat_dim);
  if (x.shape()[split_dim] % n)
    throw BuildError("stablehlo.all_to_all: dimension " + std::to_string(split_dim) + " of " + x.type.str() +
                     " does not divide by the group size " + std::to_string(n));
  Type out = x.type;
  out.shape[split_dim] /= n;
  out.shape[concat_dim] *= n;
  return emit1("stablehlo.all_to_all", {x}, out,
               "split_dimension = " + std::to_string(split_dim) + " : i64, concat_dimension = " +
                   std::to_string(concat_dim) + " : i64, split_count = " + std::to_string(n) + " : i64, " +
                   group_attrs(groups, channel));
}

Value Builder::collective_permute(Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                                  int64_t channel) {
  if (pairs.empty()) throw BuildError("stablehlo.collective_permute: no source-target pairs");
  std::set<int64_t> sources, targets;
  std::vector<std::vector<int64_t>> rows;
  for (const auto& [s, t] : pairs) {
    if (s < 0 || s >= num_replicas_ || t < 0 || t >= num_replicas_ || !sources.insert(s).second ||
        !targets.insert(t).second)
      throw BuildError("stablehlo.collective_permute: pair (" + std::to_string(s) + ", " + std::to_string(t) +
                       ") is out of range or repeats a source or target (num_replicas " +
                       std::to_string(num_replicas_) + ")");
    rows.push_back({s, t});
  }
  std::string attrs = "source_target_pairs = " + matrix_attr(rows);
  if (channel > 0)
    attrs += ", channel_handle = #stablehlo.channel_handle<handle = " + std::to_string(channel) + ", type = 1>";
  return emit1("stablehlo.collective_permute", {x}, x.type, attrs);
}

}  // namespace tt::hlo
