// One ATen call lowered into a StableHLO builder: the program inputs it
// reads, PyTorch's result types for it, and the emission of its rule (with
// the result checks, masked outputs and in-place write-back the executor
// needs). The eager executor makes one program of one call; fused eager
// lowers each call here once when it is recorded (its errors raise at the
// call), and its cluster as a lowering::Graph.
#pragma once

#include <ATen/core/stack.h>

#include <functional>
#include <memory>
#include <vector>

#include "backend/pipeline/call_record.h"
#include "backend/pipeline/op_plan.h"

namespace tt::backend {

// A result the call returns (a functional call's tensors, in order).
struct Output {
  hlo::DType dtype;
  std::vector<int64_t> sizes;
};

// return_list_sizes entry for an undefined result (output_mask false).
constexpr int kMaskedOutput = -2;

// What lowering one call taught us; reused by every later call with the
// same cache key.
struct OpMeta {
  std::vector<hlo::Type> rule_types;  // the result types the rule is given
  bool types_known = false;           // from a meta kernel (else the rule's own)
  std::vector<int> list_sizes;        // per schema return: -1, n, or kMaskedOutput
  std::vector<Output> outputs;        // Functional: one per result tensor
  bool needs_rng = false;
  int64_t rng_counters = 0;
  std::string producer;               // "aten::add.Tensor(f32[2, 3], ...)", for errors
  // The call's device checks (lowering/device_check.h): when set, its
  // program returns their flags as one more result, after the others.
  std::shared_ptr<const std::vector<lowering::CheckInfo>> checks;
  // (tensor operand, result) pairs the rule asked to donate
  // (lowering::Context::donations); honored by strict eager only.
  std::vector<std::pair<int, int>> donations;
};

// The values a call reads inside a program.
struct ProgramInputs {
  hlo::Values storages, scalars;
  hlo::Value seed, offset;
};

// Declares one parameter per storage, scalar (and the RNG seed and offset).
ProgramInputs declare_inputs(hlo::Builder& b, const CallState& st, bool needs_rng);

// Infers the result types with PyTorch's meta kernels (its argument checks
// raise here), emits the rule into `b` and describes the results (`results`
// ends with the device checks' flags when meta->checks is set). Throws
// lowering::LoweringError when the rule declines these arguments.
std::shared_ptr<OpMeta> lower_op(hlo::Builder& b, const ProgramInputs& in, const OpPlan& plan,
                                 const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                 const CallState& st, hlo::Values* results);

// Pushes a functional call's results (after its arguments were dropped):
// `result(j)` makes the j-th tensor; masked outputs become undefined tensors
// and Tensor[] returns become lists.
void push_results(torch::jit::Stack* stack, const OpMeta& meta, const std::function<at::Tensor(size_t)>& result);

}  // namespace tt::backend
