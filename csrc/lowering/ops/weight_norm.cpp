// _weight_norm_interface_backward: the gradients of w = v * g / ||v||, where
// the norm runs over every dim of v but `dim` (the forward,
// _weight_norm_interface, runs as PyTorch's decomposition). Half types
// compute in f32 and round once, as the CPU kernel accumulates.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// grad_g = sum(grad_w * v) / norm; grad_v = (g / norm) * grad_w - (g / norm) * grad_g / norm * v,
// sums over the dims other than `dim`.
TT_RULE({"aten::_weight_norm_interface_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& v_type = c.out(0);
  const Type& g_type = c.out(1);
  const Shape& full = v_type.shape;
  const int64_t rank = static_cast<int64_t>(full.size());
  const int64_t dim = wrap_dim(a[4].i, rank);
  DType t = compute_dtype(v_type.dtype);
  std::vector<int64_t> others;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) others.push_back(d);
  Value grad_w = cast_to(b, a[0].value(), t, full);
  Value v = cast_to(b, a[1].value(), t, full);
  // g and the norms hold one value per index of `dim` (in any shape of that
  // size); they compute in v's rank with 1 elsewhere.
  Shape keep(rank, 1);
  keep[dim] = full[dim];
  Value g = b.reshape(b.convert(a[2].value(), t), keep), norm = b.reshape(b.convert(a[3].value(), t), keep);
  Value grad_g = b.div(b.reshape(reduce_sum(b, b.mul(grad_w, v), others), keep), norm);
  Value scale = b.div(g, norm);
  Value shrink = b.div(b.mul(scale, grad_g), norm);
  Value grad_v = b.sub(b.mul(b.broadcast_to(scale, full), grad_w), b.mul(b.broadcast_to(shrink, full), v));
  return Values{b.convert(grad_v, v_type.dtype), b.convert(b.reshape(grad_g, g_type.shape), g_type.dtype)};
});

}  // namespace
}  // namespace tt::lowering
