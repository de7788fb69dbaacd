// Shared helpers for lowering rules: PyTorch's type promotion, broadcasting,
// dimension wrapping and the one-line elementwise rule shapes.
#pragma once

#include "lowering/rule.h"

namespace tt::lowering {

// PyTorch's result_type over tensor and scalar arguments: dimensioned tensors
// outrank 0-d tensors, which outrank wrapped numbers and Scalars; within a
// rank, the category (bool < integer < floating) decides, and a higher
// category from a lower rank lifts the result to that category's default
// (int64 / float32... see promote.cpp).
DType promote(const std::vector<const Arg*>& args);
DType promote_types(DType a, DType b);  // torch.promote_types
// The float type an integer input computes in (int -> f32, float unchanged).
DType to_float(DType t);

// Broadcast shape of several shapes (numpy rules); throws LoweringError.
Shape broadcast_shapes(const std::vector<Shape>& shapes);

// Normalise a possibly negative dim for a tensor of `rank` (rank 0 accepts
// -1 and 0, as PyTorch does).
int64_t wrap_dim(int64_t dim, int64_t rank);
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank);

// `x` converted to `t` and broadcast to `shape`.
Value cast_to(Builder& b, Value x, DType t, const Shape& shape);
// A scalar constant shaped like `like`.
Value full_like(Builder& b, Value like, double v);
Value full(Builder& b, double v, DType t, const Shape& shape);

// An elementwise op over arguments in `args` (tensors or scalars): promotes,
// broadcasts to `out`'s shape and applies `f` in the compute dtype, then
// converts to out's dtype.
using ElementFn = std::function<Value(Builder&, const Values&)>;
Value elementwise(Builder& b, const std::vector<const Arg*>& args, const Type& out,
                  const ElementFn& f, DType compute);

// Product of a shape, as int64.
int64_t numel(const Shape& s);

}  // namespace tt::lowering
