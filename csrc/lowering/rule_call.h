// The one place a lowering rule is called, from eager, fused eager and graph
// lowering alike: the rule runs, and its results are checked against the
// types PyTorch expects.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/rule.h"

namespace tt::lowering {

// A rule broke its contract (a wrong number of results, a missing value, a
// wrong shape): a bug in the rule, raised as a RuntimeError naming the op and
// its argument types from every mode, never turned into a fallback.
class RuleContractError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "f32[2, 3], 2, [0, 1]": the argument types and host values, for messages.
std::string describe_args(const Args& args);

// Calls `rule` for `ctx.op`. `masked[k]` marks a result the op's output mask
// switched off. With `checked`, the results must match ctx.out_types in
// number and (except masked ones) in shape; they come back converted to
// those dtypes, masked ones invalid. Unchecked (the types are unknown), the
// rule's results come back as it made them. LoweringError and
// InvalidArgument from the rule pass through unchanged.
Values call_rule(Builder& b, const Rule& rule, const Args& args, const Context& ctx,
                 const std::vector<bool>& masked, bool checked = true);

}  // namespace tt::lowering
