// Tensor creation and storage plumbing for tpu: empty, empty_strided,
// resize_ and set_. They touch metadata and storages only; contents move
// through programs (see executor.cpp).
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend/device/storage_contents.h"
#include "backend/device/device_storage.h"
#include "backend/pipeline/executor.h"
#include "backend/device/tpu_device.h"

namespace tt::backend {
namespace {

int device_index(std::optional<c10::Device> d) {
  if (!d || !d->has_index()) return current_device();
  return d->index();
}

void check_dtype(at::ScalarType t) {
  if (!is_supported_dtype(t)) to_element_type(t);  // raises the TypeError
}

// What every tpu allocation checks first (a strided layout, a dtype the
// device has): the dtype and device index to allocate with, the device's
// runtime started.
std::pair<at::ScalarType, int> empty_target(std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                            std::optional<c10::Device> device) {
  TORCH_CHECK(c10::layout_or_default(layout) == at::kStrided, "tpu supports only strided tensors");
  at::ScalarType t = c10::dtype_or_default(dtype);
  check_dtype(t);
  int dev = device_index(device);
  runtime_for(dev);
  return {t, dev};
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool>, std::optional<at::MemoryFormat> memory_format) {
  auto [t, dev] = empty_target(dtype, layout, device);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, dev));
  return at::detail::empty_generic(size, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t,
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<c10::Device> device, std::optional<bool>) {
  auto [t, dev] = empty_target(dtype, layout, device);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, dev));
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t);
}

// Grows `storage` to `nbytes`, keeping its contents (the new tail is zero).
void grow_storage(const c10::Storage& storage, size_t nbytes, at::ScalarType dtype) {
  auto* old = static_cast<DeviceStorage*>(storage.data_ptr().get_context());
  at::DataPtr fresh = tpu_allocator()->allocate(nbytes);
  auto* s = static_cast<DeviceStorage*>(fresh.get_context());
  if (old && (old->buffer || old->pending) && old->nbytes > 0) {
    // Copy through a program: a flat view of the old storage, padded.
    at::Tensor src = at::empty({0}, at::TensorOptions().dtype(dtype).device(c10::DeviceType::PrivateUse1, old->device));
    int64_t old_numel = static_cast<int64_t>(old->nbytes / c10::elementSize(dtype));
    src.unsafeGetTensorImpl()->set_storage_keep_dtype(storage);
    src.unsafeGetTensorImpl()->set_sizes_contiguous({old_numel});
    at::Tensor dst = at::empty({static_cast<int64_t>(nbytes / c10::elementSize(dtype))}, src.options());
    dst.zero_();
    dst.narrow(0, 0, old_numel).copy_(src);
    share_contents(s, storage_of(dst));
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  size_t old_nbytes = storage.nbytes();
  if (nbytes == old_nbytes) return;
  c10::DeviceGuard guard(storage.device());
  if (nbytes > old_nbytes) {
    grow_storage(storage, nbytes, at::kByte);
    return;
  }
  // Shrink: keep the first `nbytes` bytes (none when freeing).
  auto* old = static_cast<DeviceStorage*>(storage.data_ptr().get_context());
  at::DataPtr fresh = tpu_allocator()->allocate(nbytes);
  if (nbytes > 0 && old && (old->buffer || old->pending)) {
    at::Tensor src = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(storage.device()));
    src.unsafeGetTensorImpl()->set_storage_keep_dtype(storage);
    src.unsafeGetTensorImpl()->set_sizes_contiguous({static_cast<int64_t>(old_nbytes)});
    at::Tensor dst = at::empty({static_cast<int64_t>(nbytes)}, src.options());
    dst.copy_(src.narrow(0, 0, static_cast<int64_t>(nbytes)));
    share_contents(static_cast<DeviceStorage*>(fresh.get_context()), storage_of(dst));
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

namespace {

void maybe_grow(at::TensorImpl* self, c10::IntArrayRef size, std::optional<c10::IntArrayRef> stride,
                int64_t offset) {
  size_t itemsize = self->dtype().itemsize();
  size_t needed = stride ? at::detail::computeStorageNbytes(size, *stride, itemsize, offset)
                         : at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  const c10::Storage& st = self->unsafe_storage();
  if (needed > st.nbytes()) {
    TORCH_CHECK(st.resizable(), "Trying to resize storage that is not resizable");
    grow_storage(st, needed, c10::typeMetaToScalarType(self->dtype()));
  }
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat> format) {
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  int64_t offset = self.storage_offset();
  maybe_grow(impl, size, std::nullopt, offset);
  impl->set_sizes_contiguous(size);
  auto mf = format.value_or(at::MemoryFormat::Contiguous);
  if (mf != at::MemoryFormat::Preserve) impl->empty_tensor_restride(mf);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1 || source.nbytes() == 0,
              "set_: expected a tpu storage, got one on ", source.device());
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  int64_t off = offset.expect_int();
  auto sz = c10::asIntArrayRefUnchecked(size);
  auto sd = c10::asIntArrayRefUnchecked(stride);
  maybe_grow(impl, sz, sd, off);
  impl->set_sizes_and_strides(sz, sd, off);
  return self;
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_storage(self, source.storage(), source.storage_offset(), source.sym_sizes(), source.sym_strides());
}

at::Tensor& set_storage_plain(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, tpu_allocator(), true);
  return set_storage(self, empty, 0, {0}, {1});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_", set_empty);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_.source_Storage", set_storage_plain);
}

}  // namespace
}  // namespace tt::backend
