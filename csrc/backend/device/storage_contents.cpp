#include "backend/device/storage_contents.h"

#include <c10/core/ScalarType.h>

#include <vector>

#include "backend/device/pending_work.h"
#include "backend/device/tpu_device.h"

namespace tt::backend {

runtime::BufferPtr storage_buffer(DeviceStorage* s, at::ScalarType dtype) {
  if (s->pending) {
    std::shared_ptr<PendingValue> pv = s->pending;
    if (!pv->result && pv->error.empty()) pending_work::flush("read");
    TORCH_CHECK(pv->result, "tpu: the fused eager program that computes this tensor (from ", pv->producer,
                ") failed: ", pv->error);
    s->buffer = pv->result;
    s->pending.reset();
  }
  if (s->buffer) {
    TORCH_CHECK(!s->buffer->donated(), "tpu: internal error: a storage still holds a buffer donated to a program");
    return s->buffer;
  }
  size_t item = c10::elementSize(dtype);
  int64_t n = static_cast<int64_t>(s->nbytes / item);
  std::vector<uint8_t> zeros(s->nbytes, 0);
  s->buffer = runtime_for(s->device).FromHost(zeros.data(), to_element_type(dtype), {n}, s->device);
  return s->buffer;
}

bool deferrable(const DeviceStorage* s) {
  const auto& pv = s->pending;
  return pv && !pv->result && pv->error.empty() && pv->cluster == pending_work::generation();
}

void set_buffer(DeviceStorage* s, runtime::BufferPtr buffer) {
  s->buffer = std::move(buffer);
  s->pending.reset();
}

void share_contents(DeviceStorage* dst, DeviceStorage* src) {
  dst->buffer = src->buffer;
  dst->pending = src->pending;
}

bool contents_type(DeviceStorage* s, hlo::Type* type) {
  if (s->pending) {
    *type = s->pending->type;
    return true;
  }
  if (!s->buffer) return false;
  *type = hlo::Type{hlo_dtype(s->buffer->type()), s->buffer->dims()};
  return true;
}

at::Tensor wrap_buffer(runtime::BufferPtr buffer, at::IntArrayRef sizes, at::ScalarType dtype) {
  at::Tensor t = empty_tpu(sizes, dtype, buffer->device());
  set_buffer(storage_of(t), std::move(buffer));
  return t;
}

}  // namespace tt::backend
