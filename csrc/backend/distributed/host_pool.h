// Reused host memory for the tpu_dist transport's staging tensors. Fresh
// large host allocations come straight from the OS (mmap) and every page
// faults on first touch, which costs more than the copy itself; the pool
// keeps released blocks (exact byte sizes, a bounded total) for the next
// collective of the same size. Thread-safe: blocks come back from gloo and
// PJRT threads.
#pragma once

#include <ATen/Tensor.h>

namespace tt::backend::dist {

// An uninitialised, contiguous CPU tensor of `sizes` and `dtype` whose
// memory (64-byte aligned) returns to the pool when its storage dies.
at::Tensor pooled_host_tensor(at::IntArrayRef sizes, at::ScalarType dtype);

// Bytes the pool holds for reuse now (for tests).
int64_t host_pool_cached_bytes();

}  // namespace tt::backend::dist
