// The device events of a profiling session: every program the runner
// launches and every host<->device copy, with host-clock times, bytes and
// XLA's FLOP count. Recording costs one relaxed atomic load per launch while
// no profiler session is active (recording() is false).
//
// Times are host-observed, in nanoseconds since the Unix epoch (the clock
// torch.profiler's CPU events use): `enqueue_ns` just before PJRT_Execute,
// `ready_ns` when PJRT reports the program's results ready (the plugin's
// event callback). PJRT events carry no device timestamps.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace tt::backend::profiler {

extern std::atomic<bool> g_recording;
// True while a profiler session collects device events.
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

enum class EventKind { Program, HostToDevice, DeviceToHost };

struct DeviceEvent {
  EventKind kind = EventKind::Program;
  std::string what;          // the runner's description of the program, or the copy
  int device = 0;
  uint64_t correlation = 0;  // the profiler's id of the op that launched it (0: none)
  int64_t enqueue_ns = 0;
  std::atomic<int64_t> ready_ns{0};  // 0 until ready
  int64_t bytes_in = 0, bytes_out = 0;
  double flops = -1;                 // -1: the plugin's cost analysis gives none
  std::atomic<bool> failed{false};
};
using DeviceEventPtr = std::shared_ptr<DeviceEvent>;

int64_t now_ns();

// A program launch, started before PJRT_Execute with its argument bytes:
// the caller passes the event to end_program once Execute has returned.
DeviceEventPtr begin_program(const std::string& what, int device, const std::vector<runtime::Buffer*>& args);
// Adds the results' bytes and the FLOPs, and arranges for ready_ns to be set
// when the results are computed.
void end_program(const DeviceEventPtr& ev, const runtime::Executable& exe,
                 const std::vector<runtime::BufferPtr>& outs);
// A host<->device copy that took [start_ns, end_ns] on the host.
void record_copy(EventKind kind, int device, int64_t bytes, int64_t start_ns, int64_t end_ns);

// The profiler session's side. start() clears and starts recording; stop()
// stops it, waits (up to `wait_ms`) for launched programs to finish, and
// returns the events in launch order.
void start();
std::vector<DeviceEventPtr> stop(int64_t wait_ms = 60000);

// The op whose device events follow, as torch.profiler's correlation ids
// (per thread, nested).
void push_correlation(uint64_t id);
void pop_correlation();

}  // namespace tt::backend::profiler
