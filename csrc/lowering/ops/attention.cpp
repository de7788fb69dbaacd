// Scaled dot-product attention as one program forward and one backward.
//
// scaled_dot_product_attention on tpu reaches
// _scaled_dot_product_flash_attention_for_cpu (see
// backend/aten/attention_choice.cpp for why that op):
//   query (B, Hq, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev),
//   attn_mask broadcastable to (B, Hq, L, S): additive (float) or keep (bool),
//   is_causal: keep s <= l (the top-left aligned lower triangle PyTorch uses),
//   scale: default 1/sqrt(E).
// Grouped-query attention (Hq = G * Hk, query head h reads key head h / G, as
// repeat_interleave does) is computed without repeating key and value: query
// heads are regrouped as (B, Hk, G*L, E), which is a plain reshape.
// Scores and softmax compute in f32 for f16/bf16 (f64 stays f64). A row that
// masks every key gives zeros, as PyTorch's math path (_safe_softmax) does.
// Past a measured key length (attention_blockwise.cpp's kDenseMaxKeys) the
// same ops take the blockwise lowering, whose memory grows with L + S
// instead of L * S.
#include <cmath>

#include "lowering/ops/attention_common.h"

namespace tt::lowering {

namespace attention {

Geometry geometry(const Value& q, const Value& k, const Value& v) {
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    throw LoweringError("scaled_dot_product_attention: tpu lowers 4-d (batch, heads, seq, dim) inputs");
  Geometry g{q.shape()[0], q.shape()[1], k.shape()[1], 1, q.shape()[2], k.shape()[2], q.shape()[3], v.shape()[3]};
  if (k.shape()[0] != g.batch || v.shape()[0] != g.batch || v.shape()[1] != g.hk || v.shape()[2] != g.s ||
      k.shape()[3] != g.e)
    throw std::runtime_error("scaled_dot_product_attention: query, key and value shapes do not match");
  if (g.hk == 0 || g.hq % g.hk != 0)
    throw std::runtime_error("scaled_dot_product_attention: number of query heads must be a multiple of key heads");
  g.groups = g.hq / g.hk;
  return g;
}

double softmax_scale(const Arg& scale, int64_t head_dim) {
  if (!scale.is_none()) return scale.d;
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

}  // namespace attention

namespace {

using hlo::Cmp;
using attention::Geometry;

// The additive bias on the grouped scores (B, Hk, G*L, S): attn_mask and the
// causal triangle, -inf where a key is masked. Invalid Value when neither.
Value score_bias(Builder& b, const Geometry& g, const Arg& mask, bool causal, DType acc) {
  Shape full{g.batch, g.hq, g.l, g.s};
  Value bias;
  if (!mask.is_none()) {
    Value m = mask.value();
    if (m.dtype() == DType::Pred) {
      m = b.broadcast_to(m, full);
      m = b.select(m, b.constant(0, acc, full), b.constant(-INFINITY, acc, full));
    } else {
      m = b.broadcast_to(b.convert(m, acc), full);
    }
    bias = m;
  }
  if (causal) {
    Type it{DType::S64, full};
    Value keep = b.compare(b.iota(it, 3), b.iota(it, 2), Cmp::LE);
    Value tri = b.select(keep, b.constant(0, acc, full), b.constant(-INFINITY, acc, full));
    bias = bias.valid() ? b.add(bias, tri) : tri;
  }
  if (!bias.valid()) return bias;
  return b.reshape(bias, g.scores());
}

// scale * q k^T + bias, on the grouped layout.
Value scores(Builder& b, const Geometry& g, Value q, Value k, double scale, const Value& bias, DType acc) {
  q = b.reshape(b.convert(q, acc), g.grouped(g.e));
  k = b.convert(k, acc);
  Value sc = b.dot_general(mxu_operand(b, q), mxu_operand(b, k), {0, 1}, {0, 1}, {3}, {3}, acc, matmul_precision());
  sc = b.mul(sc, b.constant(scale, acc, sc.shape()));
  return bias.valid() ? b.add(sc, bias) : sc;
}

Value expand_rows(Builder& b, Value rows, const Shape& s) { return b.broadcast_in_dim(rows, s, {0, 1, 2}); }

// _scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p,
//   is_causal, *, attn_mask, scale) -> (output, logsumexp (B, Hq, L) f32)
// Long key sequences take the blockwise lowering (attention_blockwise.cpp);
// calls the attention kernel fits take it (attention_kernel.cpp).
TT_RULE({"aten::_scaled_dot_product_flash_attention_for_cpu"}, [](Builder& b, const Args& a, const Context& c) {
  Value q = a[0].value(), k = a[1].value(), v = a[2].value();
  if (a[3].d != 0.0) throw LoweringError("scaled_dot_product_attention with dropout (tpu takes the math path)");
  Geometry g = attention::geometry(q, k, v);
  DType acc = attention::attention_dtype(c.out(0).dtype);
  double scale = attention::softmax_scale(a[6], g.e);
  if (attention::use_kernel(g, !a[5].is_none(), q.dtype())) {
    Values r = attention::kernel_forward(b, c, q, k, v, a[4].b, scale);
    return Values{b.convert(r[0], c.out(0).dtype), b.convert(r[1], c.out(1).dtype)};
  }
  if (attention::use_blockwise(g)) {
    attention::Call call{g, b.convert(q, acc), b.convert(k, acc), b.convert(v, acc), &a[5], a[4].b, scale, acc};
    Values r = attention::blockwise_forward(b, call);
    return Values{b.convert(r[0], c.out(0).dtype), b.convert(r[1], c.out(1).dtype)};
  }
  Value bias = score_bias(b, g, a[5], a[4].b, acc);
  Value sc = scores(b, g, q, k, scale, bias, acc);
  Shape ss = g.scores();
  Value m = reduce_max(b, sc, {3});
  // Fully masked rows: max is -inf; shift by 0 instead so exp gives 0, not nan.
  Value row_dead = b.compare(m, b.constant(-INFINITY, acc, m.shape()), Cmp::EQ);
  Value shift = b.select(row_dead, b.constant(0, acc, m.shape()), m);
  Value e = b.exp(b.sub(sc, expand_rows(b, shift, ss)));
  Value sum = reduce_sum(b, e, {3});
  Value safe_sum = b.select(row_dead, b.constant(1, acc, sum.shape()), sum);
  Value p = b.div(e, expand_rows(b, safe_sum, ss));
  Value out = b.dot_general(mxu_operand(b, p), mxu_operand(b, b.convert(v, acc)), {0, 1}, {0, 1}, {3}, {2}, acc, matmul_precision());
  out = b.reshape(out, {g.batch, g.hq, g.l, g.ev});
  Value lse = b.add(shift, b.log(sum));  // -inf for a fully masked row
  lse = b.reshape(lse, {g.batch, g.hq, g.l});
  return Values{b.convert(out, c.out(0).dtype), b.convert(lse, c.out(1).dtype)};
});
TT_PADDING({"aten::_scaled_dot_product_flash_attention_for_cpu"},
           Padding::fill({{"query", 0}, {"key", 0}, {"value", 0}}));

// _scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, key,
//   value, out, logsumexp, dropout_p, is_causal, *, attn_mask, scale)
//   -> (grad_query, grad_key, grad_value)
// With P = softmax(scores) rebuilt from logsumexp:
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
//   dQ = scale * dS K, dK = scale * dS^T Q  (sums over each key head's group).
// The same shapes take the same path as the forward (blockwise past the
// threshold).
TT_RULE({"aten::_scaled_dot_product_flash_attention_for_cpu_backward"},
        [](Builder& b, const Args& a, const Context& c) {
  Value dout = a[0].value(), q = a[1].value(), k = a[2].value(), v = a[3].value();
  Value out = a[4].value(), lse = a[5].value();
  if (a[6].d != 0.0) throw LoweringError("scaled_dot_product_attention backward with dropout");
  Geometry g = attention::geometry(q, k, v);
  DType acc = attention::attention_dtype(c.out(0).dtype);
  double scale = attention::softmax_scale(a[9], g.e);
  if (attention::use_kernel(g, !a[8].is_none(), q.dtype())) {
    Values r = attention::kernel_backward(b, c, dout, q, k, v, out, lse, a[7].b, scale);
    return Values{b.convert(r[0], c.out(0).dtype), b.convert(r[1], c.out(1).dtype), b.convert(r[2], c.out(2).dtype)};
  }
  if (attention::use_blockwise(g)) {
    attention::Call call{g, b.convert(q, acc), b.convert(k, acc), b.convert(v, acc), &a[8], a[7].b, scale, acc};
    Values r = attention::blockwise_backward(b, call, b.convert(dout, acc), b.convert(out, acc), b.convert(lse, acc));
    return Values{b.convert(r[0], c.out(0).dtype), b.convert(r[1], c.out(1).dtype), b.convert(r[2], c.out(2).dtype)};
  }
  Value bias = score_bias(b, g, a[8], a[7].b, acc);
  Value sc = scores(b, g, q, k, scale, bias, acc);
  Shape ss = g.scores();
  Value l = b.reshape(b.convert(lse, acc), {g.batch, g.hk, g.groups * g.l});
  Value row_dead = b.compare(l, b.constant(-INFINITY, acc, l.shape()), Cmp::EQ);
  Value p = b.exp(b.sub(sc, expand_rows(b, b.select(row_dead, b.constant(0, acc, l.shape()), l), ss)));
  p = b.select(expand_rows(b, row_dead, ss), b.constant(0, acc, ss), p);

  Value dO = b.reshape(b.convert(dout, acc), g.grouped(g.ev));
  Value o = b.reshape(b.convert(out, acc), g.grouped(g.ev));
  std::string prec = matmul_precision();
  Value dv = b.dot_general(mxu_operand(b, p), mxu_operand(b, dO), {0, 1}, {0, 1}, {2}, {2}, acc, prec);                   // (B, Hk, S, Ev)
  Value dp = b.dot_general(mxu_operand(b, dO), mxu_operand(b, b.convert(v, acc)), {0, 1}, {0, 1}, {3}, {3}, acc, prec);  // (B, Hk, GL, S)
  Value delta = reduce_sum(b, b.mul(dO, o), {3});
  Value ds = b.mul(p, b.sub(dp, expand_rows(b, delta, ss)));
  ds = b.mul(ds, b.constant(scale, acc, ss));
  Value dq = b.dot_general(mxu_operand(b, ds), mxu_operand(b, b.convert(k, acc)), {0, 1}, {0, 1}, {3}, {2}, acc, prec);  // (B, Hk, GL, E)
  dq = b.reshape(dq, {g.batch, g.hq, g.l, g.e});
  Value qg = b.reshape(b.convert(q, acc), g.grouped(g.e));
  Value dk = b.dot_general(mxu_operand(b, ds), mxu_operand(b, qg), {0, 1}, {0, 1}, {2}, {2}, acc, prec);  // (B, Hk, S, E)
  return Values{b.convert(dq, c.out(0).dtype), b.convert(dk, c.out(1).dtype), b.convert(dv, c.out(2).dtype)};
});
TT_PADDING({"aten::_scaled_dot_product_flash_attention_for_cpu_backward"},
           Padding::fill({{"grad_out", 0}, {"query", 0}, {"key", 0}, {"value", 0}, {"out", 0}, {"logsumexp", 0}}));

}  // namespace
}  // namespace tt::lowering
