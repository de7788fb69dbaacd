// Pinned host memory for tpu uploads: what Tensor.pin_memory() and a
// DataLoader with pin_memory_device="tpu" allocate.
#pragma once

#include <c10/core/Allocator.h>

namespace tt::backend {

// Page-aligned host memory, page-locked (mlock) so the OS never pages it out
// while a transfer reads it.
c10::Allocator* pinned_host_allocator();
// Whether `ptr` lies in a page-locked allocation of pinned_host_allocator().
bool is_pinned_host_ptr(const void* ptr);

}  // namespace tt::backend
