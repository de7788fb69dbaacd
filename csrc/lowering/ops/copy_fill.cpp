// copy (copy_'s functional form), fill, zero, _efficientzerotensor, clone:
// the rules the backend's own tensor plumbing relies on.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// aten::copy(self, src, non_blocking): src converted to self's dtype and
// broadcast to self's shape.
TT_RULE({"aten::copy"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{cast_to(b, a[1].value(), c.out().dtype, c.out().shape)};
});

TT_RULE({"aten::fill.Scalar", "aten::fill.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{cast_to(b, a[1].value(), c.out().dtype, c.out().shape)};
});
TT_PADDING({"aten::fill.Scalar", "aten::fill.Tensor"}, Padding::elementwise());

TT_RULE({"aten::zero"}, [](Builder& b, const Args&, const Context& c) {
  return Values{full(b, 0, c.out().dtype, c.out().shape)};
});

// _efficientzerotensor(size, dtype, ...): plain zeros (autograd's zero
// gradients; a dense zero tensor behaves the same).
TT_RULE({"aten::_efficientzerotensor"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  if (out.dtype == DType::Pred) return Values{b.constant_int(0, DType::Pred, out.shape)};
  return Values{b.constant(0, out.dtype, out.shape)};
});

TT_RULE({"aten::clone"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{b.convert(a[0].value(), c.out().dtype)};
});
TT_PADDING({"aten::clone"}, Padding::view());

}  // namespace
}  // namespace tt::lowering
