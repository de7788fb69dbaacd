// Data-dependent shapes: nonzero and masked_select (registered in nonzero.cpp),
// and the boolean-mask form of advanced indexing.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace tt::backend {

// Replaces each bool/uint8 mask in an index.Tensor `Tensor?[]` argument by
// the integer index tensors of its true elements (one host count, as on
// CUDA). Returns false, leaving `indices` alone, when there is no mask.
bool expand_bool_indices(const at::Tensor& self, c10::IValue& indices);

// Moves CPU index tensors of an index.Tensor / index_put `Tensor?[]`
// argument to `self`'s device, as CUDA does for advanced indexing.
void indices_to_device(const at::Tensor& self, c10::IValue& indices);

}  // namespace tt::backend
