// Streams and events on tpu, with CUDA's semantics where they mean something
// for PJRT.
//
// PJRT orders programs by their data dependencies and buffers never change,
// so a stream orders nothing but *completion*: a stream is the list of the
// programs enqueued while it was current (on that thread and device), and an
// event marks "everything enqueued on this stream so far has completed". A
// Completion holds the PJRT ready events of that work; waiting on it blocks
// only the caller, never the whole device, and a stream that waits on an
// event adds the event's Completion to its own list (it blocks nobody).
//
// Stream ids: 0 is each device's default stream; getNewStream hands out 1,
// 2, ... per device. A stream lives as long as the process (as CUDA's do).
// The current stream is per thread and per device, as in CUDA.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace tt::backend::streams {

class Completion;
using CompletionPtr = std::shared_ptr<Completion>;

// Done once every PJRT event and every earlier Completion it was made from is
// done. Thread-safe.
class Completion {
 public:
  using Clock = std::chrono::steady_clock;
  // Takes the events; `after` are Completions that must be done first.
  static CompletionPtr make(std::vector<std::unique_ptr<runtime::Event>> events, std::vector<CompletionPtr> after);
  // A Completion that is done now.
  static CompletionPtr done_now();

  // Non-blocking: true when all of its work has completed. Raises a
  // RuntimeError when that work failed.
  bool query();
  // Non-blocking and never raises: true once the completion callbacks ran.
  bool done();
  // Blocks the calling thread (only) until done; raises a RuntimeError when
  // the work failed. Call without the GIL.
  void wait();
  // When the last of its work completed, as the host saw it (the PJRT
  // completion callback's time; the creation time when nothing was pending).
  // Waits for the completion callbacks when query() is already true.
  Clock::time_point done_at();

 private:
  Completion() = default;
  // One dependency finished ("" or its error).
  void dep_done(const std::string& error);
  // Runs `fn` when done (at once if done already).
  void on_done(std::function<void(const std::string& error)> fn);

  std::mutex mu_;
  std::condition_variable cv_;
  int remaining_ = 0;
  bool done_ = false;
  Clock::time_point at_;
  std::string error_;
  // Kept until done, so that query() can ask PJRT directly (a completion
  // callback may run a moment after PJRT reports the event ready).
  std::vector<std::unique_ptr<runtime::Event>> events_;
  std::vector<CompletionPtr> after_;
  std::vector<std::function<void(const std::string&)>> then_;
};

// ---- streams -------------------------------------------------------------------------

// The calling thread's current stream on `device` (0 until exchanged).
int64_t current(int device);
// Makes `id` the calling thread's current stream on `device`; returns the
// previous one. Work recorded but not yet run (fused eager) is run first, so
// that it belongs to the stream that was current when it was recorded (if
// that run fails, its results carry the error; this raises only for a bad
// device or stream).
int64_t exchange(int device, int64_t id);
// A new stream on `device`. `priority` is kept (and reported) only: XLA
// programs have no priorities.
int64_t create(int device, int priority);
int priority(int device, int64_t id);
// Raises a clear error when `id` is not a stream of `device`.
void check(int device, int64_t id);

// Adds a program's result to the calling thread's current stream on the
// buffer's device (called for every program run; see track_pending).
void track(const runtime::BufferPtr& result);

// An event's mark: completes when everything enqueued on the stream so far
// (and everything the stream waited on) has completed. Never blocks.
CompletionPtr mark(int device, int64_t id);
// Work enqueued on the stream from now on comes after `c`: later marks of
// the stream include it. Never blocks.
void wait_for(int device, int64_t id, CompletionPtr c);

// The completion of the work producing `t`'s current contents (a pending
// fused cluster is run first); done at once for a tensor that holds a ready
// buffer or no buffer. For C++ users such as collectives. Never blocks.
CompletionPtr tensor_completion(const at::Tensor& t);

}  // namespace tt::backend::streams

namespace tt::backend {

// Waits for every program and copy issued so far on `device` (-1: all).
void synchronize(int device);
// Records a buffer that an asynchronous program is producing, so that
// synchronize() can wait for it (and the current stream's events).
void track_pending(const runtime::BufferPtr& buffer);

}  // namespace tt::backend
