// _softmax, _log_softmax and their backward ops (what F.softmax,
// F.log_softmax and F.cross_entropy reach). f16/bf16 compute in f32.
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// f64 stays f64; f32, f16 and bf16 compute in f32.
DType softmax_dtype(DType out) { return out == DType::F64 ? DType::F64 : DType::F32; }

// The softmax dim as a reduction list (a 0-d input reduces over nothing).
std::vector<int64_t> softmax_dims(int64_t dim, int64_t rank) {
  int64_t d = wrap_dim(dim, rank);
  if (rank == 0) return {};
  return {d};
}

// _softmax / _log_softmax(self, dim, half_to_float).
Values softmax_rule(Builder& b, const Args& a, const Context& c, bool log) {
  Value x = a[0].value();
  auto dims = softmax_dims(a[1].i, x.rank());
  DType acc = softmax_dtype(c.out().dtype);
  x = b.convert(x, acc);
  Value m = reduce_max(b, x, dims);
  // A row of all -inf gives nan (-inf - -inf), as on the CPU.
  Value shifted = b.sub(x, expand_reduced(b, m, x.shape(), dims));
  Value e = b.exp(shifted);
  Value s = expand_reduced(b, reduce_sum(b, e, dims), x.shape(), dims);
  Value r = log ? b.sub(shifted, b.log(s)) : b.div(e, s);
  return {b.convert(r, c.out().dtype)};
}

TT_RULE({"aten::_softmax"}, [](Builder& b, const Args& a, const Context& c) { return softmax_rule(b, a, c, false); });
TT_PADDING({"aten::_softmax"}, Padding::fill({{"self", -INFINITY}}));
TT_RULE({"aten::_log_softmax"}, [](Builder& b, const Args& a, const Context& c) { return softmax_rule(b, a, c, true); });
TT_PADDING({"aten::_log_softmax"}, Padding::fill({{"self", -INFINITY}}));

// _softmax_backward_data(grad_output, output, dim, input_dtype):
//   output * (grad - sum(grad * output, dim))
// _log_softmax_backward_data: grad - exp(output) * sum(grad, dim).
Values softmax_backward(Builder& b, const Args& a, const Context& c, bool log) {
  Value g = a[0].value(), y = a[1].value();
  auto dims = softmax_dims(a[2].i, y.rank());
  DType acc = softmax_dtype(c.out().dtype);
  g = b.convert(g, acc);
  y = b.convert(y, acc);
  Value r;
  if (log) {
    Value s = expand_reduced(b, reduce_sum(b, g, dims), y.shape(), dims);
    r = b.sub(g, b.mul(b.exp(y), s));
  } else {
    Value s = expand_reduced(b, reduce_sum(b, b.mul(g, y), dims), y.shape(), dims);
    r = b.mul(y, b.sub(g, s));
  }
  return {b.convert(r, c.out().dtype)};
}

TT_RULE({"aten::_softmax_backward_data"},
        [](Builder& b, const Args& a, const Context& c) { return softmax_backward(b, a, c, false); });
TT_PADDING({"aten::_softmax_backward_data"}, Padding::fill({{"grad_output", 0}, {"output", 0}}));
TT_RULE({"aten::_log_softmax_backward_data"},
        [](Builder& b, const Args& a, const Context& c) { return softmax_backward(b, a, c, true); });
TT_PADDING({"aten::_log_softmax_backward_data"}, Padding::fill({{"grad_output", 0}, {"output", 0}}));

}  // namespace
}  // namespace tt::lowering
