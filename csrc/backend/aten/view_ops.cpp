// View ops for tpu: a view shares its base's DeviceStorage and only changes
// sizes, strides and offset. PyTorch's generic implementations do exactly
// that, so they are registered as they are; every other view op
// (transpose, select, slice, expand, ...) is composed of these.
#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view", at::native::view);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
}

}  // namespace
}  // namespace tt::backend
