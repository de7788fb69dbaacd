// Per-tensor fake quantisation with its gradient mask:
// fake_quantize_per_tensor_affine_cachemask(self, scale, zero_point, quant_min, quant_max)
// and _fake_quantize_per_tensor_affine_cachemask_tensor_qparams (scale and
// zero_point as 1-element tensors, and a fake_quant_enabled flag tensor).
// As PyTorch's CPU kernel: q = zero_point + round_half_even(x * (1 / scale))
// in f32, output = (clamp(q, quant_min, quant_max) - zero_point) * scale,
// mask = quant_min <= q <= quant_max. These ops have no meta kernels, so the
// rule states its result types (output like self, mask bool) and checks the
// host arguments itself.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// scale: f32 and zero_point: s64, both 0-d (runtime values).
Values fake_quantize(Builder& b, Value x, Value scale, Value zero_point, int64_t qmin, int64_t qmax,
                     const std::string& op) {
  if (!hlo::is_float(x.dtype())) throw LoweringError(op + " is defined for floating-point tensors only");
  const Shape& s = x.shape();
  Value sc = b.broadcast_to(scale, s);
  Value inv = b.div(b.constant(1, DType::F32, s), sc);
  Value xf = b.convert(x, DType::F32);
  Value rounded = b.unary("stablehlo.round_nearest_even", b.mul(xf, inv));
  Value zp = b.broadcast_to(zero_point, s);
  Value q = b.convert(b.add(b.convert(zp, DType::F32), rounded), DType::S64);
  Value lo = b.constant_int(qmin, DType::S64, s), hi = b.constant_int(qmax, DType::S64, s);
  Value mask = b.and_(b.compare(lo, q, Cmp::LE), b.compare(q, hi, Cmp::LE));
  Value clamped = b.convert(b.sub(b.clamp(lo, q, hi), zp), DType::F32);
  return {b.convert(b.mul(clamped, sc), x.dtype()), mask};
}

TT_RULE({"aten::fake_quantize_per_tensor_affine_cachemask"}, [](Builder& b, const Args& a, const Context& c) {
  const int64_t zero_point = a[2].i, qmin = a[3].i, qmax = a[4].i;
  if (qmin > qmax) throw InvalidArgument("`quant_min` should be less than or         equal to `quant_max`.");
  if (zero_point < qmin || zero_point > qmax)
    throw InvalidArgument("`zero_point` must be between `quant_min` and `quant_max`.");
  Value scale = b.constant(static_cast<float>(a[1].d), DType::F32);
  return fake_quantize(b, a[0].value(), scale, b.constant_int(zero_point, DType::S64), qmin, qmax, c.op);
});

// fake_quant_enabled[0] < 1 passes self through with an all-true mask.
TT_RULE({"aten::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"},
        [](Builder& b, const Args& a, const Context& c) {
          Value x = a[0].value();
          const int64_t qmin = a[4].i, qmax = a[5].i;
          if (qmin > qmax) throw InvalidArgument("`quant_min` should be less than or         equal to `quant_max`.");
          auto first = [&](const Value& t, DType dt) {
            Value flat = b.reshape(t, {lowering::numel(t.shape())});
            return b.convert(b.reshape(b.slice(flat, {0}, {1}, {1}), {}), dt);
          };
          Value scale = first(a[1].value(), DType::F32), zero_point = first(a[2].value(), DType::S64);
          Values fq = fake_quantize(b, x, scale, zero_point, qmin, qmax, c.op);
          Value on = b.broadcast_to(b.compare(first(a[3].value(), DType::F32), b.constant(1, DType::F32), Cmp::GE),
                                    x.shape());
          return Values{b.select(on, fq[0], x), b.select(on, fq[1], b.constant_int(1, DType::Pred, x.shape()))};
        });

}  // namespace
}  // namespace tt::lowering
