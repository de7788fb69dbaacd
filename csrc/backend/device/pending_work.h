// Work that was recorded but has not run yet (fused eager's pending
// cluster). The recorder installs these hooks once; the storage and device
// code below it run the pending work through them, so no include points up
// the backend.
#pragma once

#include <cstdint>

namespace tt::backend::pending_work {

using FlushFn = void (*)(const char* reason);
using GenerationFn = uint64_t (*)();

void install(FlushFn flush, GenerationFn generation);

// Runs whatever is pending (nothing when no recorder is installed);
// `reason` is counted by the recorder.
void flush(const char* reason);
// The generation of the work being recorded now (0 when none is).
uint64_t generation();

}  // namespace tt::backend::pending_work
