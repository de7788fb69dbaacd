#pragma once
// Out-of-memory errors raised for tpu devices in this process: the allocator
// refusing a storage and PJRT failing a program for lack of memory. Read by
// torch.tpu.memory_stats()["num_ooms"] (as CUDA's caching allocator counts them).
#include <cstdint>

namespace tt::backend {

void note_out_of_memory(int device);
int64_t out_of_memory_count(int device);

}  // namespace tt::backend
