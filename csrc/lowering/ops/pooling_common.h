// Pooling pieces the 2-D rules (conv_pool.cpp) and the rules over any number
// of spatial dims (pool3d_adaptive.cpp) share. `nsp` is the count of trailing
// spatial dims; everything before them is batch and channel ("planes").
#pragma once

#include <cstddef>

#include "lowering/helpers.h"

namespace tt::lowering::pooling {

// Scatters grad `g` back onto the input's planes (shape `in`) at the flat
// in-plane positions `idx`, adding where windows overlap: max pooling's backward.
Value scatter_to_planes(Builder& b, Value g, Value idx, const Shape& in, size_t nsp);

// Adaptive average pooling of x over its last nsp dims from `in` to `out`
// (forward), or its backward (x is the grad of shape `out`, the result has
// shape `in`). Computes in compute_dtype(x), returns that type.
Value adaptive_avg(Builder& b, Value x, const Shape& in, const Shape& out, size_t nsp, bool backward);

// PyTorch's check that the channel and spatial dims of an adaptive pooling
// input are non-empty (its meta kernel does not check; its CPU kernel does).
void check_nonempty(const Shape& s, size_t nsp, const char* name);

}  // namespace tt::lowering::pooling
