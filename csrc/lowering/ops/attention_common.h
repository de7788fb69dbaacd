// Scaled dot-product attention: what the dense lowering (attention.cpp) and
// the blockwise one (attention_blockwise.cpp) share, and which of the two a
// call takes.
//
// Both work on the grouped layout: query heads regrouped as
// (B, Hk, G*L, E) (query head h reads key head h / G, as repeat_interleave
// does), key (B, Hk, S, E), value (B, Hk, S, Ev); they compute in f32 for
// f16/bf16 (f64 stays f64).
#pragma once

#include <cstdint>

#include "lowering/helpers.h"

namespace tt::lowering::attention {

inline DType attention_dtype(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

struct Geometry {
  int64_t batch, hq, hk, groups, l, s, e, ev;
  Shape grouped(int64_t last) const { return {batch, hk, groups * l, last}; }
  Shape scores() const { return {batch, hk, groups * l, s}; }
};

// Shapes of query (B, Hq, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev);
// throws for anything else.
Geometry geometry(const Value& q, const Value& k, const Value& v);

// The scale argument, or 1/sqrt(E) when it is None.
double softmax_scale(const Arg& scale, int64_t head_dim);

// One attention call as both lowerings read it. `mask` is the attn_mask
// argument (None, additive float or keep bool, broadcastable to
// (B, Hq, L, S)); q, k, v are already converted to `acc`.
struct Call {
  Geometry g;
  Value q, k, v;
  const Arg* mask;
  bool causal;
  double scale;
  DType acc;
};

// Online softmax over key blocks: (out (B, Hq, L, Ev), logsumexp (B, Hq, L)),
// both in `acc`; a query row that masks every key gives zeros and -inf.
Values blockwise_forward(Builder& b, const Call& c);
// (dq, dk, dv) in `acc`, from the forward's out and logsumexp, one key block
// at a time; dout, out and lse are in `acc`.
Values blockwise_backward(Builder& b, const Call& c, Value dout, Value out, Value lse);

// Which lowering a call takes. Blockwise keeps memory linear in L and S
// (the L x S score matrix never exists; one (L, block) tile does); dense is
// faster while the whole matrix is small. See attention_blockwise.cpp for the
// measured threshold.
enum class Path { Auto = 0, Dense = 1, Blockwise = 2, Kernel = 3 };
bool use_blockwise(const Geometry& g);

// The attention kernel (attention_kernel.cpp): a flash-attention kernel that
// torch_tpu.kernels.attention registers as two external ops (JAX's Pallas
// kernel; Mosaic on TPU, the interpret lowering elsewhere). A call takes it
// when it fits the kernel (no mask, as many key heads as query heads, E ==
// Ev, not f64) and either the path is forced to Kernel, or the path is Auto,
// L and S are multiples of the kernel's 128-row blocks, and the loader said
// the kernel is for this plugin (kernel_choice.h: a TPU's).
bool use_kernel(const Geometry& g, bool has_mask, DType dtype);
// (out (B, Hq, L, Ev) in q's dtype, logsumexp (B, Hq, L) f32).
Values kernel_forward(Builder& b, const Context& ctx, Value q, Value k, Value v, bool causal, double scale);
// (dq, dk, dv) in q's dtype.
Values kernel_backward(Builder& b, const Context& ctx, Value dout, Value q, Value k, Value v, Value out, Value lse,
                       bool causal, double scale);

// Private, for benchmarks and tests that compare the two lowerings on the
// same shapes: force a path, and (block_keys > 0) the key block size.
// Programs are cached by their call, not by this switch: the caller drops
// the program cache whenever it changes (torch_tpu._sdpa_path does).
void set_path_override(Path path, int64_t block_keys);
Path path_override();
int64_t block_keys();

}  // namespace tt::lowering::attention
