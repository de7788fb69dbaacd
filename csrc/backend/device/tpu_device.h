// The current tpu device (per thread, as in CUDA) and access to the runtime.
#pragma once

#include <functional>

#include "runtime/runtime.h"

namespace tt::backend {

int current_device();
void set_current_device(int device);
// Number of devices; 0 when no plugin can be loaded (never throws).
int device_count_or_zero();
// The runtime, after checking that `device` exists (IndexError-like message).
// A process's first call also checks that it may use the device at all: not
// in a child forked after the parent used it, nor where the process check
// (set_process_check) refuses.
runtime::Runtime& runtime_for(int device);
// True in a child forked after the parent used the device.
bool in_bad_fork();
// A check run at a process's first device use; it throws to refuse (the
// Python layer refuses inside DataLoader worker processes).
void set_process_check(std::function<void()> check);

}  // namespace tt::backend
