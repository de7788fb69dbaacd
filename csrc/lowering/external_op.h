// Operators whose lowering is a module written elsewhere: a JAX function or
// Pallas kernel that JAX traced and lowered to StableHLO. Its rule asks a
// provider for the module that fits the call (its tensor operands' types and
// its other arguments), adds the module's functions to the program being
// built and calls its entry with func.call. Eager (one call, one program),
// fused eager and whole graphs all reach the kernel through this one rule,
// so inside a cluster or a compiled graph it is a call within the one
// program.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lowering/rule.h"

namespace tt::lowering {

struct ExternalModule {
  std::string symbol;     // the entry function, unique to this module's text
  std::string functions;  // MLIR text of its func.func ops, all private, renamed
  std::vector<Type> inputs, results;  // the entry's signature
  // (tensor operand, result) pairs the module aliases (JAX's donation):
  // the operand's buffer may become the result's.
  std::vector<std::pair<int, int>> donations;
};

// Given the types of the call's tensor operands (Tensor arguments and
// TensorList elements, in schema order; a None is left out) and its other
// arguments (in schema order), returns the module. Throws std::exception
// with the reason when the kernel cannot be lowered for these arguments.
using ModuleProvider =
    std::function<ExternalModule(const std::vector<Type>& tensors, const std::vector<HostArg>& host_args)>;

// Registers (or replaces) the rule of `functional_name` ("ns::op"). A
// provider's answer is kept per operand types and host arguments, so the
// provider runs once per such key; replacing the provider forgets them.
void register_external_op(const std::string& functional_name, ModuleProvider provider);
bool is_external_op(const std::string& functional_name);
// Lowers a call of the external op `functional_name` on these operands and
// host arguments, as its own rule would: for a rule that picks a kernel
// (SDPA's attention kernel). Throws InvalidArgument when it has no provider.
Values call_external(const std::string& functional_name, Builder& b, const Values& operands,
                     const std::vector<HostArg>& host, const Context& ctx);
// Modules the providers produced (cache misses) and answers served from the
// kept ones, over every external op.
struct ExternalStats {
  int64_t lowered = 0, reused = 0;
};
ExternalStats external_stats();

}  // namespace tt::lowering
