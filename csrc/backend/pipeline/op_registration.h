// Registers the executor as the tpu kernel of every ATen op whose functional
// form has a lowering rule: the functional op itself, its in-place form and
// its out= form. Ops PyTorch decomposes for every backend
// (CompositeImplicitAutograd) are left to that decomposition.
// A rule for an op of another namespace ("torchvision::roi_align") becomes
// that op's tpu kernel, functional form only, even before its library loads.
#pragma once

#include <string>
#include <vector>

namespace tt::backend {

// Idempotent; call once the plugin-independent parts are loaded.
void register_lowered_ops();
// "aten::add_.Tensor -> aten::add.Tensor (inplace)" lines, for the coverage tool.
std::vector<std::string> registered_ops();

}  // namespace tt::backend
