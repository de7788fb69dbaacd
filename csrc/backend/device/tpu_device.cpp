#include "backend/device/tpu_device.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>


namespace tt::backend {

namespace {
thread_local int t_current_device = 0;

// Whether this process passed the checks of its first device use.
std::atomic<bool> g_use_checked{false};
// fork() after the device was used: the child holds a copy of the parent's
// PJRT client, whose threads and device handles did not survive.
bool g_bad_fork = false;
std::function<void()> g_process_check;

void after_fork_in_child() {
  g_bad_fork = runtime::Runtime::IsInitialized();
  g_use_checked.store(false);
}
const int g_atfork = pthread_atfork(nullptr, nullptr, &after_fork_in_child);

void check_first_use() {
  TORCH_CHECK(!g_bad_fork,
              "tpu: cannot use the tpu device in a forked subprocess: the parent process already uses it and "
              "its PJRT client does not survive fork(). Use the 'spawn' start method "
              "(torch.multiprocessing.set_start_method('spawn')); for a DataLoader, let the workers return CPU "
              "tensors and move each batch to tpu in the main process (DataLoader(..., pin_memory=True)).");
  if (g_process_check) g_process_check();
  g_use_checked.store(true);
}
}  // namespace

int current_device() { return t_current_device; }

void set_current_device(int device) {
  runtime_for(device);
  t_current_device = device;
}

int device_count_or_zero() {
  try {
    return runtime::Runtime::Get().device_count();
  } catch (const std::exception&) {
    return 0;
  }
}

bool in_bad_fork() { return g_bad_fork; }

void set_process_check(std::function<void()> check) { g_process_check = std::move(check); }

runtime::Runtime& runtime_for(int device) {
  if (!g_use_checked.load(std::memory_order_relaxed)) check_first_use();
  runtime::Runtime* rt = nullptr;
  try {
    rt = &runtime::Runtime::Get();
  } catch (const runtime::Error& e) {
    TORCH_CHECK(false, "torch_tpu could not start a PJRT plugin: ", e.what());
  }
  TORCH_CHECK_INDEX(device >= 0 && device < rt->device_count(), "tpu:", device,
                    " does not exist: this process has ", rt->device_count(),
                    " tpu device(s) (set TORCH_TPU_NUM_DEVICES to change the CPU plugin's count)");
  return *rt;
}

}  // namespace tt::backend
