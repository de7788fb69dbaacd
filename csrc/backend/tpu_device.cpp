#include "backend/tpu_device.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/pending_work.h"
#include "backend/stream_events.h"

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
std::mutex g_pending_mu;
std::vector<std::weak_ptr<runtime::Buffer>> g_pending;
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

void track_pending(const runtime::BufferPtr& buffer) {
  streams::track(buffer);
  std::lock_guard<std::mutex> lock(g_pending_mu);
  if (g_pending.size() > 4096) {
    std::vector<std::weak_ptr<runtime::Buffer>> alive;
    for (auto& w : g_pending)
      if (!w.expired()) alive.push_back(w);
    g_pending.swap(alive);
  }
  g_pending.push_back(buffer);
}

void synchronize(int device) {
  pending_work::flush("synchronize");
  std::vector<std::weak_ptr<runtime::Buffer>> pending;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    pending.swap(g_pending);
  }
  std::vector<std::weak_ptr<runtime::Buffer>> other_devices;
  for (auto& w : pending) {
    auto b = w.lock();
    // A donated buffer's work is the input of the program it was given to,
    // whose results are tracked themselves.
    if (!b || b->donated()) continue;
    if (device >= 0 && b->device() != device) {
      other_devices.push_back(w);
      continue;
    }
    b->BlockUntilReady();
  }
  if (!other_devices.empty()) {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    g_pending.insert(g_pending.end(), other_devices.begin(), other_devices.end());
  }
}

}  // namespace tt::backend
