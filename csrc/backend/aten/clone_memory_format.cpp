// clone(memory_format): the result's strides follow PyTorch's rules
// (preserve a dense layout, else the suggested format; channels_last on
// request). A contiguous result is the aten::clone rule's program; any other
// layout is empty_like in that layout plus one copy_ program into it.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "backend/pipeline/executor.h"

namespace tt::backend {
namespace {

bool result_is_contiguous(const at::Tensor& self, at::MemoryFormat format) {
  switch (format) {
    case at::MemoryFormat::Contiguous:
      return true;
    case at::MemoryFormat::Preserve:
      if (self.is_non_overlapping_and_dense()) return self.is_contiguous();
      return self.suggest_memory_format() == at::MemoryFormat::Contiguous;
    default:
      return false;
  }
}

at::Tensor contiguous_clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::clone", "");
  static const OpPlan plan = [] {
    const lowering::Rule* rule = lowering::find_rule("aten::clone");
    TORCH_CHECK(rule, "tpu: the aten::clone lowering rule is missing");
    return make_plan("aten::clone", rule, Mode::Functional);
  }();
  torch::jit::Stack stack{self, memory_format};
  execute(plan, op, &stack);
  return stack.back().toTensor();
}

at::Tensor clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  const auto format = memory_format.value_or(at::MemoryFormat::Preserve);
  if (result_is_contiguous(self, format)) return contiguous_clone(self, memory_format);
  at::Tensor out = at::empty_like(self, self.options(), format);
  if (out.is_contiguous()) return contiguous_clone(self, memory_format);
  out.copy_(self);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("clone", clone); }

}  // namespace
}  // namespace tt::backend
