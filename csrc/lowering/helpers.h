// Shared helpers for lowering rules: PyTorch's type promotion, broadcasting,
// dimension wrapping and the one-line elementwise rule shapes.
#pragma once

#include "lowering/rule.h"

namespace tt::lowering {

// PyTorch's result_type over tensor and scalar arguments: dimensioned tensors
// outrank 0-d tensors, which outrank wrapped numbers and Scalars; within a
// rank, the category (bool < integer < floating) decides, and a higher
// category from a lower rank lifts the result to that category's default
// (int64 / float32; implemented in helpers.cpp).
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
// x converted to `t` as PyTorch converts: like stablehlo.convert, except
// that float8_e4m3fn (no infinities) saturates out-of-range values and
// infinities to +-448 where XLA makes them NaN.
Value convert_dtype(Builder& b, Value x, DType t);
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

// A Scalar's host value (rules registered with static_scalars only).
double host_scalar(const Arg& a);

}  // namespace tt::lowering

// ---- reductions and matmul -------------------------------------------------------
namespace tt::lowering {

// The dot_general precision for float matmuls and convolutions, following
// torch.get_float32_matmul_precision(): "highest" (PyTorch's default) ->
// HIGHEST (full f32 on a TPU), "high" -> HIGH (bf16x3), "medium" -> DEFAULT
// (one bf16 pass). The backend sets it before building a program and keys
// its caches by it. XLA's CPU plugin computes f32 whatever it says.
enum class MatmulPrecision { Highest = 0, High = 1, Medium = 2 };
void set_matmul_precision(MatmulPrecision p);
std::string matmul_precision();
// An operand of a float dot under matmul_precision(): under Medium (one bf16
// pass) a float32 value is rounded to bfloat16 (reduce_precision to 8
// exponent and 7 mantissa bits, kept as f32), which is what a TPU's MXU does
// with it, so that every plugin computes the TPU's result (XLA's CPU plugin
// otherwise ignores the precision); other precisions and dtypes pass unchanged.
Value mxu_operand(Builder& b, Value x);

// The dtype an op computes or accumulates in: f16/bf16 -> f32 (PyTorch's
// opmath type), others unchanged. The one helper for this rule: every rule
// that upcasts half types calls it.
DType compute_dtype(DType t);

// The dims a reduction runs over: a None or empty `int[]?` argument means all
// dims; otherwise the wrapped dims. A 0-d input reduces over nothing.
std::vector<int64_t> reduction_dims(const Arg& dim, int64_t rank);

// Sum / max / min of `x` over `dims` (dims removed from the shape); `x`'s
// dtype is kept, so convert to the accumulation dtype first.
Value reduce_sum(Builder& b, Value x, const std::vector<int64_t>& dims);
Value reduce_max(Builder& b, Value x, const std::vector<int64_t>& dims);
Value reduce_min(Builder& b, Value x, const std::vector<int64_t>& dims);
// The identity of max (the dtype's lowest value, -inf for floats) or of min
// (its highest value), as a 0-d constant.
Value extreme_identity(Builder& b, DType t, bool for_max);
// `x` reduced over `dims` and broadcast back to its shape (keepdim + expand).
Value expand_reduced(Builder& b, Value reduced, const Shape& full, const std::vector<int64_t>& dims);

}  // namespace tt::lowering
