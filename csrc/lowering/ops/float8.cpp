// float8 (float8_e4m3fn, float8_e5m2): storage and conversions are generic
// (the copy and convert rules); the one op that computes with float8 inputs
// is the scaled matrix product.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// _scaled_mm(self, mat2, scale_a, scale_b, bias=None, scale_result=None,
// out_dtype=None, use_fast_accum=False): (self * scale_a) @ (mat2 * scale_b)
// + bias in float32, divided by scale_result for a float8 result. Scales are
// per tensor (one element) or per row of self (M,1) and column of mat2 (1,N).
TT_RULE({"aten::_scaled_mm"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  const DType acc = DType::F32;
  Value x = b.convert(a[0].value(), acc), y = b.convert(a[1].value(), acc);
  x = b.mul(x, b.broadcast_to(b.convert(a[2].value(), acc), x.shape()));
  y = b.mul(y, b.broadcast_to(b.convert(a[3].value(), acc), y.shape()));
  Value r = b.dot_general(x, y, {}, {}, {1}, {0}, acc, matmul_precision());
  if (a.size() > 4 && !a[4].is_none()) r = b.add(r, b.broadcast_to(b.convert(a[4].value(), acc), o.shape));
  const bool float8_out = o.dtype == DType::F8E4M3FN || o.dtype == DType::F8E5M2;
  if (float8_out && a.size() > 5 && !a[5].is_none())
    r = b.div(r, b.broadcast_to(b.convert(a[5].value(), acc), o.shape));
  return Values{convert_dtype(b, r, o.dtype)};
});

}  // namespace
}  // namespace tt::lowering
