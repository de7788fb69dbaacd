// Advanced-indexing arguments as the executor prepares them before a rule
// sees them: CPU index tensors move to the indexed tensor's device, and a
// boolean mask becomes the integer indices of its true elements (one host
// count through at::nonzero, as on CUDA).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace tt::backend {

// Replaces each bool/uint8 mask in an index.Tensor `Tensor?[]` argument by
// the integer index tensors of its true elements. Returns false, leaving
// `indices` alone, when there is no mask.
bool expand_bool_indices(const at::Tensor& self, c10::IValue& indices);

// Moves CPU index tensors of an index.Tensor / index_put `Tensor?[]`
// argument to `self`'s device, as CUDA does for advanced indexing.
void indices_to_device(const at::Tensor& self, c10::IValue& indices);

}  // namespace tt::backend
