// How one ATen overload runs natively: its rule and the form of the call
// (functional or in-place), decided once at registration.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>

#include "lowering/rule.h"

namespace tt::backend {

enum class Mode {
  Functional,  // returns new tensors
  Inplace,     // writes the functional result into argument 0 (add_)
};

// Advanced indexing whose boolean masks become integer indices before the
// rule runs (their result shapes depend on the data).
enum class MaskIndexing { None, Read, Write };

struct OpPlan {
  std::string functional;  // rule name, "aten::add.Tensor"
  const lowering::Rule* rule = nullptr;
  Mode mode = Mode::Functional;
  // The functional op, used to infer result types for an in-place call.
  std::optional<c10::OperatorHandle> functional_op;
  MaskIndexing mask_indexing = MaskIndexing::None;
};

// A plan for `functional`'s rule, with its flags derived once here rather
// than on every call.
OpPlan make_plan(const std::string& functional, const lowering::Rule* rule, Mode mode,
                 std::optional<c10::OperatorHandle> functional_op = std::nullopt);

}  // namespace tt::backend
