// Reading and writing a DeviceStorage's contents. In op-by-op eager mode the
// contents are always a PJRT buffer; in fused eager mode a storage may hold a
// PendingValue instead: the result of a recorded cluster that has not run.
// Anything that needs the bytes (a copy to the host, a CPU fallback, a
// compiled graph) asks for the buffer here, which runs the cluster first.
#pragma once

#include <memory>
#include <string>

#include "backend/device/device_storage.h"
#include "hlo/builder.h"

namespace tt::backend {

struct PendingValue {
  hlo::Type type;     // of the buffer it will become
  int device = 0;
  uint64_t cluster = 0;  // the cluster's generation (see fused_cluster.h)
  int id = -1;           // value number inside that cluster
  std::string producer;  // the op that computes it, for error messages
  // Set when the cluster ran: the buffer, or why there is none.
  runtime::BufferPtr result;
  std::string error;
};

// The storage's buffer: runs the pending cluster when the contents are
// pending; zero-fills an uninitialised storage (torch.empty) as `dtype`.
runtime::BufferPtr storage_buffer(DeviceStorage* s, at::ScalarType dtype);
// True when the contents are pending in the cluster now being recorded, so a
// recorded op may read them without running anything.
bool deferrable(const DeviceStorage* s);
// Replaces the contents with a buffer, or with another storage's contents
// (buffers are immutable, so sharing is a copy).
void set_buffer(DeviceStorage* s, runtime::BufferPtr buffer);
void share_contents(DeviceStorage* dst, DeviceStorage* src);
// The contents' element type and element count without running anything
// (false when the storage holds nothing yet).
bool contents_type(DeviceStorage* s, hlo::Type* type);
// A contiguous tpu tensor whose storage is `buffer` (buffer numel == numel).
at::Tensor wrap_buffer(runtime::BufferPtr buffer, at::IntArrayRef sizes, at::ScalarType dtype);

}  // namespace tt::backend
