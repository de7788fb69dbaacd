// Host copies of tpu tensors for the tpu_dist transport over gloo (the CPU
// plugin has no collectives between processes). A collective reads each
// device input into a dense host tensor on the calling thread (the host
// waits for the value there), gloo runs on the host tensors, and the results
// are written back into the device tensors' storages.
#pragma once

#include <ATen/Tensor.h>

namespace tt::backend::dist {

// The dtype gloo carries for a device dtype: int16 travels as int32 (gloo
// has no int16); every other device dtype as itself. Raises a TypeError for
// dtypes the transport cannot carry.
at::ScalarType wire_dtype(at::ScalarType t);

// Raises a clear error unless `t` is a tpu tensor; `what` names the
// collective and the argument for the message.
void check_tpu(const at::Tensor& t, const char* what);

// A dense host copy of a tpu tensor's value, in its wire dtype, in pooled
// host memory (host_pool.h). Waits for the value. Call on the thread that issues the collective.
// Where the plugin keeps the bytes in this process (the CPU plugin), they
// are read by a memcpy on this thread (no PJRT transfer).
at::Tensor to_host(const at::Tensor& device);
// A dense, uninitialised host tensor shaped like `device`, in its wire dtype
// (for outputs that the collective overwrites whole).
at::Tensor host_like(const at::Tensor& device);

// Whether a direct write may hand its host result to the device buffer
// as that buffer's memory (zero copy, on plugins where device memory is host
// memory). On unless TORCH_TPU_DIST_ZERO_COPY=0, which forces a copy.
bool host_aliasing_enabled();

// Whether writing `device` whole needs no device program: it is contiguous
// and spans its whole storage, so a write rebinds the storage to a new
// buffer. Such writes are safe from any thread (see write_back).
bool direct_write(const at::Tensor& device);
// Writes a host result into a tpu tensor in place (views and aliases of its
// storage see the new value). For direct_write tensors this only creates a
// buffer (aliasing `host` where host_aliasing_enabled: `host` must not be
// written after this) and rebinds the storage, which may run on a gloo
// completion thread;
// otherwise it runs a device copy and must run on the issuing thread.
void write_back(const at::Tensor& device, const at::Tensor& host);

}  // namespace tt::backend::dist
