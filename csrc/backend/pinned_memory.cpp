#include "backend/pinned_memory.h"

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
    }
  }
  if (b.locked) munlock(ptr, b.bytes);
  std::free(ptr);
}

struct PinnedHostAllocator final : c10::Allocator {
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
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedHostAllocator g_allocator;

}  // namespace

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
