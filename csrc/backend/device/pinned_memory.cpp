#include "backend/device/pinned_memory.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace tt::backend {
namespace {

struct Block {
  size_t bytes;
  bool locked;
};

std::mutex g_mu;
std::map<uintptr_t, Block> g_blocks;  // by start address
at::HostStats g_stats;                // under g_mu

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

void free_pinned(void* ptr) {
  if (!ptr) return;
  Block b{0, false};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != g_blocks.end()) {
      b = it->second;
      g_blocks.erase(it);
      g_stats.active_requests.decrease(1);
      g_stats.active_bytes.decrease(b.bytes);
      g_stats.allocations.decrease(1);
      g_stats.allocated_bytes.decrease(b.bytes);
      ++g_stats.num_host_free;
    }
  }
  if (b.locked) munlock(ptr, b.bytes);
  std::free(ptr);
}

// Page-locked host memory for tpu (torch.Tensor.pin_memory(), DataLoader's
// pin_memory, torch.accelerator's host-cache calls). It caches nothing: a
// freed block goes straight back to the system.
struct PinnedHostAllocator final : at::HostAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
    const size_t page = page_size();
    const size_t bytes = (nbytes + page - 1) / page * page;
    void* ptr = nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&ptr, page, bytes) == 0,
                     "tpu: could not allocate ", nbytes, " bytes of pinned host memory");
    // Locking can fail where RLIMIT_MEMLOCK is small: the memory is then
    // ordinary pageable memory, and is_pinned() says so.
    const bool locked = mlock(ptr, bytes) == 0;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_blocks[reinterpret_cast<uintptr_t>(ptr)] = Block{bytes, locked};
      g_stats.active_requests.increase(1);
      g_stats.active_bytes.increase(bytes);
      g_stats.allocations.increase(1);
      g_stats.allocated_bytes.increase(bytes);
      ++g_stats.num_host_alloc;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  // A copy from host memory keeps its source alive until the plugin has read
  // it (copy_ops.cpp), so no stream event has to guard a block's reuse.
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}  // nothing is cached
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_stats;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(g_mu);
    for (c10::CachingAllocator::Stat* st :
         {&g_stats.active_requests, &g_stats.active_bytes, &g_stats.allocations, &g_stats.allocated_bytes})
      st->reset_accumulated();
    g_stats.num_host_alloc = g_stats.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(g_mu);
    for (c10::CachingAllocator::Stat* st :
         {&g_stats.active_requests, &g_stats.active_bytes, &g_stats.allocations, &g_stats.allocated_bytes})
      st->reset_peak();
  }
};

PinnedHostAllocator g_allocator;

}  // namespace

// torch.accelerator.empty_host_cache() and the host-memory statistics find
// the accelerator's host allocator here.
REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator)

c10::Allocator* pinned_host_allocator() { return &g_allocator; }

bool is_pinned_host_ptr(const void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_blocks.upper_bound(p);
  if (it == g_blocks.begin()) return false;
  --it;
  return it->second.locked && p < it->first + it->second.bytes;
}

}  // namespace tt::backend
