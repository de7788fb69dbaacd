#include "backend/distributed/host_staging.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/device/device_storage.h"
#include "backend/distributed/host_pool.h"
#include "backend/pipeline/executor.h"
#include "backend/pipeline/program_runner.h"
#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"
#include "settings/settings.h"

namespace tt::backend::dist {

at::ScalarType wire_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBool: case at::kChar: case at::kByte: case at::kInt: case at::kLong:
    case at::kHalf: case at::kBFloat16: case at::kFloat: case at::kDouble:
      return t;
    case at::kShort:
      return at::kInt;
    default:
      TORCH_CHECK_TYPE(false, "tpu_dist: collectives do not support dtype ", t);
  }
}

void check_tpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "tpu_dist ", what, ": undefined tensor");
  TORCH_CHECK(t.device().is_privateuseone(), "tpu_dist ", what, ": expected tpu tensors, got a tensor on ",
              t.device(), " (this process group's tpu_dist backend carries only tpu tensors; use a "
              "\"cpu:gloo,tpu:tpu_dist\" group for CPU tensors)");
  TORCH_CHECK(t.layout() == at::kStrided, "tpu_dist ", what, ": only dense tensors are supported");
  wire_dtype(t.scalar_type());
}


at::Tensor to_host(const at::Tensor& device) {
  // One transfer straight into the result (Tensor.cpu() would stage it in a
  // second host tensor).
  at::Tensor host = pooled_host_tensor(device.sizes(), device.scalar_type());
  if (device.numel() > 0) {
    runtime::BufferPtr buf = dense_buffer(device);
    verify_device_checks();  // the host waits here: raise what earlier programs found
    // Where the plugin's memory is this process's (the CPU plugin, including
    // buffers write_back made zero-copy), a memcpy on this thread; PJRT's
    // ToHost hands the copy to a plugin thread and waits for it.
    const void* bytes = buf->nbytes() == host.nbytes() ? buf->HostAddress() : nullptr;
    if (bytes) std::memcpy(host.mutable_data_ptr(), bytes, host.nbytes());
    else buf->ToHost(host.mutable_data_ptr(), host.nbytes());
  }
  at::ScalarType wire = wire_dtype(device.scalar_type());
  return wire == host.scalar_type() ? host : host.to(wire);
}

at::Tensor host_like(const at::Tensor& device) {
  return pooled_host_tensor(device.sizes(), wire_dtype(device.scalar_type()));
}

bool host_aliasing_enabled() {
  return settings::Bool(settings::Id::TORCH_TPU_DIST_ZERO_COPY);
}

bool direct_write(const at::Tensor& device) {
  if (!device.is_contiguous() || device.numel() == 0) return false;
  return static_cast<size_t>(device.numel()) * device.element_size() == storage_of(device)->nbytes &&
         device.storage_offset() == 0;
}

void write_back(const at::Tensor& device, const at::Tensor& host) {
  if (device.numel() == 0) return;
  at::Tensor value = host.scalar_type() == device.scalar_type() ? host : host.to(device.scalar_type());
  value = value.contiguous();
  if (!direct_write(device)) {
    at::Tensor d = device;
    d.copy_(value.view(device.sizes()));
    return;
  }
  int dev = device.device().index();
  runtime::Runtime& rt = runtime_for(dev);
  const void* data = value.const_data_ptr();
  auto type = to_element_type(device.scalar_type());
  runtime::BufferPtr buf;
  if (host_aliasing_enabled() && rt.can_alias_host()) {
    // The new buffer keeps the host result as its memory (no copy); the
    // host tensor is not touched again and lives until the plugin lets go.
    buf = rt.FromHostAliased(data, type, device.sizes().vec(), dev, std::make_shared<at::Tensor>(value));
  } else {
    buf = rt.FromHost(data, type, device.sizes().vec(), dev);
  }
  set_buffer(storage_of(device), std::move(buf));
}

}  // namespace tt::backend::dist
