// The storage behind a tpu tensor: one immutable PJRT buffer, rebound when an
// in-place op writes. A tpu DataPtr points at a DeviceStorage (never at
// device memory), so PyTorch's storage machinery (sharing, aliasing, views)
// works unchanged while the bytes stay on the PJRT device.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>

#include "hlo/builder.h"
#include "runtime/runtime.h"

namespace tt::backend {

struct PendingValue;  // backend/device/storage_contents.h

struct DeviceStorage {
  int device = 0;
  size_t nbytes = 0;
  // The current contents; null until first written (torch.empty), then any
  // shape whose element count * item size == nbytes. Read and write them
  // through backend/device/storage_contents.h: in fused eager mode the contents may
  // instead be `pending`, a value that a recorded cluster will produce.
  runtime::BufferPtr buffer;
  std::shared_ptr<PendingValue> pending;
};

// The DeviceStorage of a tpu tensor (throws for other devices).
DeviceStorage* storage_of(const at::Tensor& t);
// The allocator registered for PrivateUse1.
c10::Allocator* tpu_allocator();
// A contiguous tpu tensor on `device`, with no contents yet.
at::Tensor empty_tpu(at::IntArrayRef sizes, at::ScalarType dtype, int device);

// UntypedStorage.resize_ (PrivateUse1 hooks): grows or shrinks a tpu
// storage to `nbytes`, keeping the leading contents (a grown tail is zero);
// 0 frees its buffer. Tensors on the storage keep their sizes.
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

// Whether the tpu tensor's elements are all of its storage, each once (so
// writing the whole tensor may rebind the storage's buffer).
bool covers_own_storage(const at::Tensor& t);

// The dtype converters, the only ones: PyTorch's ScalarType against PJRT's
// element type (unsupported dtypes raise a TypeError naming the dtype), and
// the program builder's DType, whose numbering equals PJRT's.
runtime::ElementType to_element_type(at::ScalarType t);
at::ScalarType to_scalar_type(runtime::ElementType t);
bool is_supported_dtype(at::ScalarType t);
inline hlo::DType hlo_dtype(runtime::ElementType t) { return static_cast<hlo::DType>(t); }
inline runtime::ElementType element_type(hlo::DType t) { return static_cast<runtime::ElementType>(t); }
inline hlo::DType hlo_dtype(at::ScalarType t) { return hlo_dtype(to_element_type(t)); }
inline at::ScalarType aten_dtype(hlo::DType t) { return to_scalar_type(element_type(t)); }

}  // namespace tt::backend
