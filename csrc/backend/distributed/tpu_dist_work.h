// The Work a tpu_dist collective returns. It wraps the gloo Work that moves
// the host copies, and writes the host results back into the tpu tensors:
//  - asynchronous: when every output can be written without a device
//    program (backend/distributed/host_staging.h: direct_write), the write-back runs
//    as a continuation of gloo's future, so getFuture() completes on its own
//    (DDP chains on it and waits on the future, never on the Work);
//  - completed: otherwise the collective finished before the Work was made;
//  - deferred (send/recv): gloo's send waits for the matching recv, so the
//    Work finishes in wait() (or a successful isCompleted()), on the
//    caller's thread, and the future completes then.
// wait() returns once the tpu tensors hold the results, and raises what the
// collective raised, naming it; getFuture()'s value is the output tensors.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tt::backend::dist {

class TpuDistWork : public c10d::Work {
 public:
  // Asynchronous: `finish` writes the results back (on gloo's completion
  // thread) once `gloo_done` (the gloo Work's future) completes; `outputs`
  // become the future's value.
  TpuDistWork(int rank, c10d::OpType type, std::string what, c10::intrusive_ptr<c10::ivalue::Future> gloo_done,
              std::function<void()> finish, std::vector<at::Tensor> outputs);
  // Already completed with `outputs`.
  TpuDistWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs);
  // Deferred: `finish` runs in wait() once `gloo` is done.
  static c10::intrusive_ptr<TpuDistWork> Deferred(int rank, c10d::OpType type, std::string what,
                                                  c10::intrusive_ptr<c10d::Work> gloo, std::function<void()> finish,
                                                  std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  // Deferred Works: finishes once gloo's work is done (or failed).
  void finish_deferred();

  std::string what_;
  c10::intrusive_ptr<c10d::Work> deferred_;
  std::function<void()> finish_;
  std::mutex mu_;  // "tpu_dist all_reduce (rank 0 of 2)" for messages
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The Work of a coalescing block (startCoalescing .. endCoalescing): the
// Works of every collective issued inside it. wait() waits each; the
// future completes when all have, with their outputs end to end.
class CoalescedWork : public c10d::Work {
 public:
  CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works);
  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The tensor list type of a future's value.
c10::TypePtr tensor_list_type();
// An exception's message without a C++ backtrace.
std::string error_text(std::exception_ptr e);

}  // namespace tt::backend::dist
