// The allocator registered for PrivateUse1 (c10::DeviceAllocator), so that
// torch.accelerator's memory API works for tpu.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/device/device_storage.h"
#include "backend/device/oom_count.h"
#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"
#include "runtime/host_heap.h"
#include "runtime/runtime.h"

namespace tt::backend {

namespace {

void delete_storage(void* ctx) { delete static_cast<DeviceStorage*>(ctx); }

// A c10::DeviceAllocator so that torch.accelerator's memory API works for
// tpu. PJRT owns device memory: a storage's buffer is allocated by the
// program that produces it and freed when its last reference dies, so bytes
// reserved equal bytes allocated. The CPU plugin's freed memory stays in the
// process heap (runtime/host_heap.h); emptying the cache hands it back.
struct TpuAllocator final : c10::DeviceAllocator {
  bool initialized() override { return device_count_or_zero() > 0; }
  void emptyCache(c10::MempoolId_t) override {
    if (runtime::Runtime::IsInitialized()) runtime::ReleaseHostHeap();
  }
  // Buffers stay alive while a program that reads them is pending, whichever
  // stream issued it, so there is nothing to record.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    auto& rt = runtime_for(device);
    c10::CachingDeviceAllocator::DeviceStats s;
    const int64_t live = rt.live_bytes(device), peak = rt.peak_bytes(device);
    const int64_t count = rt.live_buffers(device);
    for (auto* stat : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes}) {
      auto& a = (*stat)[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      a.current = live;
      a.peak = peak;
    }
    // Buffer counts have no tracked peak: it reads as the current count.
    for (auto* stat : {&s.allocation, &s.active, &s.segment}) {
      auto& a = (*stat)[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      a.current = a.peak = count;
    }
    s.num_ooms = out_of_memory_count(device);
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex device) override { runtime_for(device).reset_peak(device); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    auto& rt = runtime_for(device);
    const int64_t cap = rt.memory_capacity(device), used = rt.live_bytes(device);
    return {static_cast<size_t>(std::max<int64_t>(cap - used, 0)), static_cast<size_t>(cap)};
  }

  c10::DataPtr allocate(size_t nbytes) override {
    int device = current_device();
    auto& rt = runtime_for(device);
    int64_t capacity = rt.memory_capacity(device);
    int64_t used = rt.live_bytes(device);
    if (static_cast<int64_t>(nbytes) > capacity - used) note_out_of_memory(device);
    TORCH_CHECK_WITH(OutOfMemoryError, static_cast<int64_t>(nbytes) <= capacity - used,
                     "tpu:", device, " out of memory: tried to allocate ", nbytes, " bytes; ", used,
                     " bytes in use of ", capacity,
                     " (free tensors, or set TORCH_TPU_MEMORY_LIMIT to raise the CPU plugin's limit)");
    auto* s = new DeviceStorage{device, nbytes, nullptr};
    return {s, s, &delete_storage, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  // Storage-to-storage copies share the buffer: buffers are immutable.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    auto* d = static_cast<DeviceStorage*>(dest);
    auto* s = static_cast<const DeviceStorage*>(src);
    TORCH_CHECK(count == s->nbytes && count == d->nbytes,
                "tpu: partial storage copies are not supported");
    share_contents(d, const_cast<DeviceStorage*>(s));
  }
};

TpuAllocator g_allocator;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

c10::Allocator* tpu_allocator() { return &g_allocator; }

}  // namespace tt::backend
