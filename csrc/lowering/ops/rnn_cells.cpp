// The fused recurrent cells PyTorch's LSTM/GRU (and LSTMCell/GRUCell) call
// on a non-CPU device, after it has computed the gate matmuls itself:
// _thnn_fused_lstm_cell, _thnn_fused_lstm_cell_backward_impl,
// _thnn_fused_gru_cell and _thnn_fused_gru_cell_backward.
//
// Contracts (those of PyTorch's CUDA kernels, which define these ops):
// - gates are [B, G*H] with the gate blocks side by side (LSTM: i, f, g, o;
//   GRU: r, z, n); biases are [G*H] and optional;
// - the `workspace` result is private to the forward/backward pair:
//   LSTM [B, 4H] = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o);
//   GRU  [B, 5H] = r, z, n, hx, hn + b_hn;
// - f16/bf16 compute in f32 and round each result once.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// Block `k` of `n` equal blocks along dim 1 of a [B, n*H] value.
Value block(Builder& b, Value x, int64_t k, int64_t n) {
  const int64_t h = x.shape()[1] / n;
  return b.slice(x, {0, k * h}, {x.shape()[0], (k + 1) * h});
}

Value sigmoid(Builder& b, Value x) { return b.unary("stablehlo.logistic", x); }
Value one_minus(Builder& b, Value x) { return b.sub(full_like(b, x, 1.0), x); }

// PyTorch's rnn_cell_checkSizes, for the op without a meta kernel (GRU):
// the same conditions, raised as PyTorch's RuntimeError.
void check_cell_sizes(const Args& a, int64_t gates, const char* op) {
  const Value &ig = a[0].tensor, &hg = a[1].tensor, &prev = a[2].tensor;
  auto fail = [&](const std::string& why) { throw InvalidArgument(std::string(op) + ": " + why); };
  if (ig.rank() != 2) fail("input_gates must be 2-dimensional, got " + std::to_string(ig.rank()));
  if (ig.shape() != hg.shape()) fail("input_gates and hidden_gates must have the same size");
  if (ig.shape()[1] % gates != 0)
    fail("the gate size " + std::to_string(ig.shape()[1]) + " is not a multiple of " + std::to_string(gates));
  for (size_t i = 3; i < 5 && i < a.size(); ++i) {
    if (!a[i].is_tensor()) continue;
    if (a[i].tensor.rank() != 1 || a[i].tensor.shape()[0] != ig.shape()[1])
      fail("each bias must be 1-dimensional with " + std::to_string(ig.shape()[1]) + " elements");
  }
  if (numel(prev.shape()) != ig.shape()[0] * ig.shape()[1] / gates)
    fail("the hidden state has " + std::to_string(numel(prev.shape())) + " elements, expected " +
         std::to_string(ig.shape()[0] * ig.shape()[1] / gates));
}

// input_gates + hidden_gates (+ biases) in the compute type `t`; with
// `hidden_out`, the input side (+ input bias) is returned and the hidden side
// (+ hidden bias) goes to *hidden_out (GRU keeps them apart).
Value gate_sum(Builder& b, const Args& a, DType t, Value* hidden_out = nullptr) {
  const Shape& s = a[0].tensor.shape();
  Value ig = b.convert(a[0].tensor, t), hg = b.convert(a[1].tensor, t);
  if (a.size() > 3 && a[3].is_tensor()) ig = b.add(ig, b.broadcast_to(b.convert(a[3].tensor, t), s));
  if (a.size() > 4 && a[4].is_tensor()) hg = b.add(hg, b.broadcast_to(b.convert(a[4].tensor, t), s));
  if (hidden_out) {
    *hidden_out = hg;
    return ig;
  }
  return b.add(ig, hg);
}

// (input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace).
TT_RULE({"aten::_thnn_fused_lstm_cell"}, [](Builder& b, const Args& a, const Context& c) {
  check_cell_sizes(a, 4, "_thnn_fused_lstm_cell");
  const DType t = compute_dtype(a[0].tensor.dtype());
  Value gates = gate_sum(b, a, t);
  Value i = sigmoid(b, block(b, gates, 0, 4)), f = sigmoid(b, block(b, gates, 1, 4));
  Value g = b.tanh(block(b, gates, 2, 4)), o = sigmoid(b, block(b, gates, 3, 4));
  Value cx = b.reshape(b.convert(a[2].tensor, t), i.shape());
  Value cy = b.add(b.mul(f, cx), b.mul(i, g));
  Value hy = b.mul(o, b.tanh(cy));
  const DType state = a[2].tensor.dtype();
  const Shape& cx_shape = a[2].tensor.shape();
  return Values{b.reshape(b.convert(hy, state), cx_shape), b.reshape(b.convert(cy, state), cx_shape),
                b.convert(b.concatenate({i, f, g, o}, 1), a[0].tensor.dtype())};
});

// (grad_hy?, grad_cy?, cx, cy, workspace, has_bias) -> (grad_gates, grad_cx, grad_bias?).
// All three are None when neither gradient is given.
TT_RULE({"aten::_thnn_fused_lstm_cell_backward_impl"}, [](Builder& b, const Args& a, const Context& c) {
  if (!a[0].is_tensor() && !a[1].is_tensor()) return Values{Value{}, Value{}, Value{}};
  const Value& ws = a[4].tensor;
  const DType t = compute_dtype(ws.dtype());
  const Shape hs{ws.shape()[0], ws.shape()[1] / 4};
  auto state = [&](const Arg& x) { return b.reshape(b.convert(x.tensor, t), hs); };
  Value w = b.convert(ws, t);
  Value i = block(b, w, 0, 4), f = block(b, w, 1, 4), g = block(b, w, 2, 4), o = block(b, w, 3, 4);
  Value cx = state(a[2]), tanh_cy = b.tanh(state(a[3]));
  Value zero = full(b, 0.0, t, hs);
  Value ghy = a[0].is_tensor() ? state(a[0]) : zero;
  Value gcy = a[1].is_tensor() ? state(a[1]) : zero;
  // d/d(cy) through hy = o * tanh(cy), plus the incoming grad_cy.
  Value gc = b.add(b.mul(b.mul(ghy, o), one_minus(b, b.mul(tanh_cy, tanh_cy))), gcy);
  Value gi = b.mul(b.mul(gc, g), b.mul(i, one_minus(b, i)));
  Value gf = b.mul(b.mul(gc, cx), b.mul(f, one_minus(b, f)));
  Value gg = b.mul(b.mul(gc, i), one_minus(b, b.mul(g, g)));
  Value go = b.mul(b.mul(ghy, tanh_cy), b.mul(o, one_minus(b, o)));
  Value grad_gates = b.concatenate({gi, gf, gg, go}, 1);
  Value grad_bias = a[5].b ? b.convert(reduce_sum(b, grad_gates, {0}), ws.dtype()) : Value{};
  return Values{b.convert(grad_gates, ws.dtype()),
                b.reshape(b.convert(b.mul(gc, f), a[2].tensor.dtype()), a[2].tensor.shape()), grad_bias};
});

// (input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace).
TT_RULE({"aten::_thnn_fused_gru_cell"}, [](Builder& b, const Args& a, const Context& c) {
  check_cell_sizes(a, 3, "_thnn_fused_gru_cell");
  const DType t = compute_dtype(a[0].tensor.dtype());
  Value hidden;
  Value input = gate_sum(b, a, t, &hidden);
  Value r = sigmoid(b, b.add(block(b, input, 0, 3), block(b, hidden, 0, 3)));
  Value z = sigmoid(b, b.add(block(b, input, 1, 3), block(b, hidden, 1, 3)));
  Value hn = block(b, hidden, 2, 3);
  Value n = b.tanh(b.add(block(b, input, 2, 3), b.mul(r, hn)));
  Value hx = b.reshape(b.convert(a[2].tensor, t), r.shape());
  Value hy = b.add(n, b.mul(z, b.sub(hx, n)));
  const DType state = a[2].tensor.dtype();
  return Values{b.reshape(b.convert(hy, state), a[2].tensor.shape()),
                b.convert(b.concatenate({r, z, n, hx, hn}, 1), state)};
});

// (grad_hy, workspace, has_bias)
//   -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias?, grad_hidden_bias?).
TT_RULE({"aten::_thnn_fused_gru_cell_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Value& ws = a[1].tensor;
  if (ws.rank() != 2 || ws.shape()[1] % 5 != 0)
    throw InvalidArgument("_thnn_fused_gru_cell_backward: workspace must be [batch, 5 * hidden]");
  const DType t = compute_dtype(ws.dtype());
  Value w = b.convert(ws, t);
  Value r = block(b, w, 0, 5), z = block(b, w, 1, 5), n = block(b, w, 2, 5), hx = block(b, w, 3, 5),
        hn = block(b, w, 4, 5);
  Value go = b.reshape(b.convert(a[0].tensor, t), r.shape());
  Value gz = b.mul(b.mul(go, b.sub(hx, n)), b.mul(z, one_minus(b, z)));
  Value ghx = b.mul(go, z);
  Value gn = b.mul(b.mul(go, one_minus(b, z)), one_minus(b, b.mul(n, n)));
  Value ghn = b.mul(gn, r);
  Value gr = b.mul(b.mul(gn, hn), b.mul(r, one_minus(b, r)));
  Value gi = b.concatenate({gr, gz, gn}, 1), gh = b.concatenate({gr, gz, ghn}, 1);
  const DType out = a[0].tensor.dtype();
  Value gib, ghb;
  if (a[2].b) {
    gib = b.convert(reduce_sum(b, gi, {0}), out);
    ghb = b.convert(reduce_sum(b, gh, {0}), out);
  }
  return Values{b.convert(gi, out), b.convert(gh, out), b.convert(ghx, out), gib, ghb};
});

}  // namespace
}  // namespace tt::lowering
