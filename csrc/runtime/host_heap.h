// The CPU plugin's device memory is the process heap: its buffers and each
// program's scratch memory come from malloc. glibc hands a block over its mmap
// threshold (at most 32 MiB) to mmap and gives it back to the kernel on free,
// and trims the heap top over its trim threshold, so a program whose scratch
// or results are that large pays page faults and page zeroing for all of
// that memory on every run (measured: a fifth of a fused GPT-2 step's CPU
// time). KeepHostHeap makes freed memory stay in the heap for the next run,
// as a device's caching allocator would; ReleaseHostHeap hands the unused
// part back (torch.tpu.empty_cache()). glibc only; elsewhere both do nothing.
// Best effort for other threads: glibc fixes its arena limit when a thread
// first needs an arena, so if one did before the client starts, XLA's threads
// may get arenas of their own, whose heaps (64 MiB at most) still map and
// unmap blocks larger than that.
#pragma once

namespace tt::runtime {

// Called once when the CPU plugin's client is created, unless
// TORCH_TPU_HOST_HEAP=release. Returns whether the setting was applied.
bool KeepHostHeap();
// Returns the heap's free memory to the kernel (malloc_trim).
void ReleaseHostHeap();
// Whether KeepHostHeap applied its setting in this process.
bool HostHeapKept();

}  // namespace tt::runtime
