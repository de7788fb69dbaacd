#include "backend/distributed/host_pool.h"

#include <ATen/ATen.h>
#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>
#include <vector>

namespace tt::backend::dist {
namespace {

// Blocks below this size are left to the ordinary allocator (cheap there).
constexpr size_t kMinPooledBytes = 256 * 1024;
// The most bytes the pool keeps unused; a release past it frees the block.
constexpr size_t kMaxCachedBytes = size_t{512} << 20;

class HostPool {
 public:
  void* acquire(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        return p;
      }
    }
    return c10::alloc_cpu(bytes);  // 64-byte aligned
  }
  void release(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + bytes <= kMaxCachedBytes) {
        free_[bytes].push_back(p);
        cached_ += bytes;
        return;
      }
    }
    c10::free_cpu(p);
  }
  int64_t cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(cached_);
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// Never destroyed: blocks may come back from plugin threads at exit.
HostPool& pool() {
  static HostPool* p = new HostPool();
  return *p;
}

}  // namespace

at::Tensor pooled_host_tensor(at::IntArrayRef sizes, at::ScalarType dtype) {
  auto opts = at::TensorOptions().dtype(dtype).device(at::kCPU);
  int64_t numel = c10::multiply_integers(sizes);
  size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  if (bytes < kMinPooledBytes) return at::empty(sizes, opts);
  void* p = pool().acquire(bytes);
  return at::from_blob(p, sizes, [bytes](void* q) { pool().release(q, bytes); }, opts);
}

int64_t host_pool_cached_bytes() { return pool().cached(); }

}  // namespace tt::backend::dist
