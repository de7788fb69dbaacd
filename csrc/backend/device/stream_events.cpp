#include "backend/device/stream_events.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "backend/device/device_storage.h"
#include "backend/device/pending_work.h"
#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"

namespace tt::backend::streams {

// ---- Completion ----------------------------------------------------------------------

CompletionPtr Completion::make(std::vector<std::unique_ptr<runtime::Event>> events, std::vector<CompletionPtr> after) {
  CompletionPtr c(new Completion());
  c->remaining_ = static_cast<int>(events.size() + after.size()) + 1;  // +1: held until all are registered
  c->events_ = std::move(events);
  c->after_ = std::move(after);
  std::weak_ptr<Completion> weak = c;
  auto notify = [weak](const std::string& error) {
    if (auto self = weak.lock()) self->dep_done(error);
  };
  // Registration may call back at once (the work is done): no lock is held.
  for (auto& e : c->events_) e->OnReady(notify);
  for (auto& a : c->after_) a->on_done(notify);
  c->dep_done("");
  return c;
}

CompletionPtr Completion::done_now() { return make({}, {}); }

void Completion::dep_done(const std::string& error) {
  std::vector<std::function<void(const std::string&)>> then;
  std::vector<std::unique_ptr<runtime::Event>> events;
  std::vector<CompletionPtr> after;
  std::string err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error.empty() && error_.empty()) error_ = error;
    if (--remaining_ > 0) return;
    done_ = true;
    at_ = Clock::now();
    then.swap(then_);
    events.swap(events_);  // destroyed outside the lock
    after.swap(after_);
    err = error_;
  }
  cv_.notify_all();
  for (auto& fn : then) fn(err);
}

void Completion::on_done(std::function<void(const std::string& error)> fn) {
  std::string err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      then_.push_back(std::move(fn));
      return;
    }
    err = error_;
  }
  fn(err);
}

bool Completion::query() {
  std::vector<CompletionPtr> after;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(error_.empty(), "tpu: work recorded by this event failed: ", error_);
    if (done_) return true;
    for (const auto& e : events_)
      if (!e->IsReady()) return false;
    after = after_;
  }
  for (const auto& a : after)
    if (!a->query()) return false;
  return true;
}

bool Completion::done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Completion::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  TORCH_CHECK(error_.empty(), "tpu: work recorded by this event failed: ", error_);
}

Completion::Clock::time_point Completion::done_at() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return at_;
}

// ---- streams -------------------------------------------------------------------------

namespace {

// What a stream's next mark must wait for.
struct StreamState {
  int priority = 0;
  std::mutex mu;
  std::vector<std::weak_ptr<runtime::Buffer>> work;  // results of programs since the last mark
  std::vector<CompletionPtr> after;                  // the last mark and the completions waited on
  // Sizes at which the lists drop what is freed or done (doubling past what
  // stays, so that a long run without a mark costs amortized O(1) per item).
  size_t prune_work_at = 4096, prune_after_at = 64;
};

std::mutex g_mu;
// [device][id]; states are never freed, so a reference stays valid. Leaked
// on purpose: completion callbacks may run on plugin threads during exit.
using StreamTable = std::vector<std::vector<std::unique_ptr<StreamState>>>;
StreamTable& g_streams = *new StreamTable();
thread_local std::vector<int64_t> t_current;

StreamState& state(int device, int64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_streams.size() <= static_cast<size_t>(device)) g_streams.resize(device + 1);
  auto& per_device = g_streams[device];
  if (per_device.empty()) per_device.push_back(std::make_unique<StreamState>());  // the default stream
  TORCH_CHECK(id >= 0 && id < static_cast<int64_t>(per_device.size()), "tpu: stream ", id,
              " does not exist on tpu:", device);
  return *per_device[id];
}

}  // namespace

int64_t current(int device) {
  return device >= 0 && static_cast<size_t>(device) < t_current.size() ? t_current[device] : 0;
}

int64_t exchange(int device, int64_t id) {
  runtime_for(device);
  check(device, id);
  int64_t old = current(device);
  if (old == id) return old;
  try {
    pending_work::flush("stream");
  } catch (const std::exception&) {
    // The cluster's results keep the error and raise where they are read; a
    // stream change (c10's stream guards make it in destructors) must not throw.
  }
  if (t_current.size() <= static_cast<size_t>(device)) t_current.resize(device + 1, 0);
  t_current[device] = id;
  return old;
}

int64_t create(int device, int priority) {
  runtime_for(device);
  state(device, 0);  // the default stream exists first
  std::lock_guard<std::mutex> lock(g_mu);
  auto& per_device = g_streams[device];
  per_device.push_back(std::make_unique<StreamState>());
  per_device.back()->priority = priority;
  return static_cast<int64_t>(per_device.size()) - 1;
}

int priority(int device, int64_t id) { return state(device, id).priority; }

void check(int device, int64_t id) { state(device, id); }

void track(const runtime::BufferPtr& result) {
  StreamState& s = state(result->device(), current(result->device()));
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.work.size() >= s.prune_work_at) {  // a long run without a mark: drop the freed ones
    std::vector<std::weak_ptr<runtime::Buffer>> alive;
    for (auto& w : s.work)
      if (!w.expired()) alive.push_back(std::move(w));
    s.work.swap(alive);
    s.prune_work_at = std::max<size_t>(4096, 2 * s.work.size());
  }
  s.work.push_back(result);
}

CompletionPtr mark(int device, int64_t id) {
  runtime_for(device);
  // Recorded fused-eager work belongs to the current stream: run it first.
  pending_work::flush("event");
  StreamState& s = state(device, id);
  std::vector<std::shared_ptr<runtime::Buffer>> work;
  std::vector<CompletionPtr> after;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& w : s.work)
      if (auto b = w.lock(); b && !b->donated()) work.push_back(std::move(b));  // donated: see synchronize
    s.work.clear();
    after.swap(s.after);
  }
  std::vector<std::unique_ptr<runtime::Event>> events;
  events.reserve(work.size());
  try {
    for (const auto& b : work) events.push_back(b->ReadyEvent());
  } catch (const runtime::Error& e) {
    TORCH_CHECK(false, "tpu: could not record an event on stream ", id, " of tpu:", device, ": ", e.what());
  }
  CompletionPtr c = Completion::make(std::move(events), std::move(after));
  std::lock_guard<std::mutex> lock(s.mu);
  s.after.insert(s.after.begin(), c);  // a wait_for may have come in meanwhile
  return c;
}

void wait_for(int device, int64_t id, CompletionPtr c) {
  runtime_for(device);
  StreamState& s = state(device, id);
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.after.size() >= s.prune_after_at) {  // many waits without a mark: drop the done ones
    std::vector<CompletionPtr> pending;
    for (auto& a : s.after)
      if (!a->done()) pending.push_back(std::move(a));
    s.after.swap(pending);
    s.prune_after_at = std::max<size_t>(64, 2 * s.after.size());
  }
  s.after.push_back(std::move(c));
}

CompletionPtr tensor_completion(const at::Tensor& t) {
  DeviceStorage* s = storage_of(t);
  if (!s->buffer && !s->pending) return Completion::done_now();
  runtime::BufferPtr b = storage_buffer(s, t.scalar_type());
  std::vector<std::unique_ptr<runtime::Event>> events;
  try {
    events.push_back(b->ReadyEvent());
  } catch (const runtime::Error& e) {
    TORCH_CHECK(false, "tpu: could not wait for a tensor's contents: ", e.what());
  }
  return Completion::make(std::move(events), {});
}

namespace {

// Tensor.record_stream(s): PJRT keeps a buffer alive while a pending program
// reads it, so no allocator must be told; the stream is only checked.
void record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1, "record_stream: expected a tpu stream, got one on ",
              s.device());
  check(s.device_index(), s.id());
  (void)self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", record_stream); }

}  // namespace
}  // namespace tt::backend::streams

namespace tt::backend {
namespace {
std::mutex g_pending_mu;
std::vector<std::weak_ptr<runtime::Buffer>> g_pending;
}  // namespace

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
