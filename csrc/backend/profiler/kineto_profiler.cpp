// torch.profiler's device side for tpu: a Kineto child profiler registered
// through PyTorch's PrivateUse1 profiler registry (REGISTER_PRIVATEUSE1_PROFILER,
// torch/csrc/profiler/standalone/privateuse1_profiler.h). With
// ProfilerActivity.PrivateUse1 among the activities, Kineto starts a session
// here; each program becomes a CONCURRENT_KERNEL activity and each host<->device
// copy a GPU_MEMCPY activity, which PyTorch counts as PrivateUse1 (tpu) device
// time and links to the op that launched it through its correlation id.
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "backend/profiler/device_trace.h"

namespace tt::backend::profiler {
namespace {

constexpr int32_t kProgramsRow = 0, kCopiesRow = 1;

// The event's name in torch.profiler's tables: the op for an eager program
// (its description without the argument list), "fused cluster (N ops)" and
// "graph <name> (N ops)" for the others; the full description is the
// "program" field of the trace.
std::string short_name(const DeviceEvent& ev) {
  const std::string& w = ev.what;
  if (ev.kind != EventKind::Program) return w;
  static const std::string fused = "a fused eager cluster of ";
  if (w.rfind(fused, 0) == 0) return "tpu fused cluster (" + w.substr(fused.size(), w.find(' ', fused.size()) - fused.size()) + " ops)";
  if (w.rfind("graph ", 0) == 0) return "tpu " + w;
  return "tpu " + w.substr(0, w.find('('));
}

class Session : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    profiler::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    events_ = profiler::stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    // Programs on one device run one after another: a program queued behind
    // another starts when that one is ready, not when the host launched it.
    std::map<int, int64_t> device_free;
    int64_t first = 0, last = 0;
    for (const auto& ev : events_) {
      int64_t end = ev->ready_ns.load();
      if (end == 0) continue;  // not finished within stop()'s wait
      int64_t begin = ev->enqueue_ns;
      if (ev->kind == EventKind::Program) {
        // A ready time observed before the previous program's (callbacks
        // arrive late and out of order on a busy host) keeps the launch time.
        int64_t& free = device_free[ev->device];
        if (free < end) begin = std::max(begin, free);
        free = std::max(free, end);
      }
      bool program = ev->kind == EventKind::Program;
      buffer_->emplace_activity(buffer_->span,
                                program ? libkineto::ActivityType::CONCURRENT_KERNEL
                                        : libkineto::ActivityType::GPU_MEMCPY,
                                short_name(*ev));
      auto& act = *buffer_->activities.back();
      act.startTime = begin;
      act.endTime = end;
      act.device = ev->device;
      act.resource = program ? kProgramsRow : kCopiesRow;
      act.id = static_cast<int32_t>(ev->correlation);
      if (linked && ev->correlation) act.linked = linked(static_cast<int32_t>(ev->correlation));
      act.addMetadataQuoted("program", ev->what);
      act.addMetadata("bytes_in", ev->bytes_in);
      act.addMetadata("bytes_out", ev->bytes_out);
      act.addMetadata("launched_ns", ev->enqueue_ns);
      if (ev->flops >= 0) act.addMetadata("flops", static_cast<int64_t>(ev->flops));
      if (ev->failed) act.addMetadata("failed", 1);
      first = first ? std::min(first, begin) : begin;
      last = std::max(last, end);
    }
    buffer_->span = libkineto::TraceSpan(first, last, "tpu");
    for (const auto& act : buffer_->activities) act->log(logger);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "tpu", "tpu 0"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    return {libkineto::ResourceInfo{kProgramsRow, 0, 0, "programs"},
            libkineto::ResourceInfo{kCopiesRow, 1, 0, "host<->device copies"}};
  }
  // The activities point at buffer_->span, so the buffer is handed over by
  // pointer and never moved.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

 private:
  std::vector<DeviceEventPtr> events_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
};

class TpuActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    for (auto t : types)
      if (activities_.count(t)) return std::make_unique<Session>();
    return nullptr;  // a CPU-only profile records nothing here
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "tpu";
  std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::CONCURRENT_KERNEL,
                                                   libkineto::ActivityType::GPU_MEMCPY};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace
}  // namespace tt::backend::profiler
