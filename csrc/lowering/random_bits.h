// A counter-based random generator built from integer StableHLO ops, so the
// same (seed, offset) gives the same numbers on every PJRT plugin
// (rng_bit_generator's algorithms are implementation-defined).
#pragma once

#include "lowering/rule.h"

namespace tt::lowering {

// Threefry-2x32 with 20 rounds: two u32 words per element of `shape`, for the
// counters offset + 0 .. offset + numel - 1 under the key `seed`.
std::pair<Value, Value> threefry_bits(Builder& b, Value seed, Value offset, const Shape& shape);
// Uniform floats in [0, 1) of dtype `t` (computed in f32, or f64 for f64).
Value uniform01(Builder& b, const Context& c, const Shape& shape, DType t);
// Standard normal floats (Box-Muller) of dtype `t`.
Value standard_normal(Builder& b, const Context& c, const Shape& shape, DType t);
// The key of round `round` (a 0-d integer value) and lane `lane` of a
// rejection sampler whose base key is `seed`: seed + (2 * round + lane) * step.
// An odd `step` keeps the keys of different rounds and lanes apart.
Value round_key(Builder& b, Value seed, Value round, int64_t lane, int64_t step);

}  // namespace tt::lowering
