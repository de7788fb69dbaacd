#include "backend/profiler/device_trace.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "runtime/executable_cost.h"

namespace tt::backend::profiler {

std::atomic<bool> g_recording{false};

namespace {

std::mutex g_mu;
std::condition_variable g_ready_cv;
std::vector<DeviceEventPtr> g_events;  // this session's, in launch order

thread_local std::vector<uint64_t> t_correlation;

// XLA's FLOPs per executable, asked of the plugin once per session. Keyed by
// the loaded executable's address, which the plugin could reuse for another
// program if the cache evicts one during the session (the cost of not
// tracking executables' lifetimes from here).
std::unordered_map<const void*, double> g_flops;  // under g_mu

double flops_of(const runtime::Executable& exe) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_flops.find(exe.raw());
    if (it != g_flops.end()) return it->second;
  }
  double f = runtime::Flops(exe);
  std::lock_guard<std::mutex> lock(g_mu);
  g_flops[exe.raw()] = f;
  return f;
}

uint64_t current_correlation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

void keep(DeviceEventPtr ev) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_recording.load(std::memory_order_relaxed)) g_events.push_back(std::move(ev));
}

void mark_ready(DeviceEvent& ev, bool failed) {
  ev.failed = failed;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ev.ready_ns = now_ns();
  }
  g_ready_cv.notify_all();
}

int64_t bytes_of(const std::vector<runtime::Buffer*>& bufs) {
  int64_t n = 0;
  for (const runtime::Buffer* b : bufs) n += static_cast<int64_t>(b->nbytes());
  return n;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

DeviceEventPtr begin_program(const std::string& what, int device, const std::vector<runtime::Buffer*>& args) {
  auto ev = std::make_shared<DeviceEvent>();
  ev->what = what;
  ev->device = device;
  ev->correlation = current_correlation();
  ev->bytes_in = bytes_of(args);
  ev->enqueue_ns = now_ns();
  return ev;
}

void end_program(const DeviceEventPtr& ev, const runtime::Executable& exe,
                 const std::vector<runtime::BufferPtr>& outs) {
  for (const auto& b : outs) ev->bytes_out += static_cast<int64_t>(b->nbytes());
  ev->flops = flops_of(exe);
  keep(ev);
  if (outs.empty()) {
    mark_ready(*ev, false);
    return;
  }
  // Every result of one XLA program becomes ready together.
  try {
    outs.front()->ReadyEvent()->OnReady([ev](const std::string& error) { mark_ready(*ev, !error.empty()); });
  } catch (const runtime::Error&) {
    mark_ready(*ev, true);
  }
}

void record_copy(EventKind kind, int device, int64_t bytes, int64_t start_ns, int64_t end_ns) {
  auto ev = std::make_shared<DeviceEvent>();
  ev->kind = kind;
  ev->what = kind == EventKind::HostToDevice ? "copy host to tpu" : "copy tpu to host";
  ev->device = device;
  ev->correlation = current_correlation();
  (kind == EventKind::HostToDevice ? ev->bytes_in : ev->bytes_out) = bytes;
  ev->enqueue_ns = start_ns;
  ev->ready_ns = end_ns;
  keep(std::move(ev));
}

void start() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.clear();
  g_flops.clear();
  g_recording = true;
}

std::vector<DeviceEventPtr> stop(int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(g_mu);
  g_recording = false;
  std::vector<DeviceEventPtr> events;
  events.swap(g_events);
  // A program launched inside the window is reported once it finishes.
  g_ready_cv.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] {
    for (const auto& ev : events)
      if (ev->ready_ns.load() == 0) return false;
    return true;
  });
  return events;
}

void push_correlation(uint64_t id) { t_correlation.push_back(id); }

void pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}

}  // namespace tt::backend::profiler
