#include "backend/distributed/tpu_dist_work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <thread>

namespace tt::backend::dist {

c10::TypePtr tensor_list_type() { return c10::ListType::create(c10::TensorType::get()); }

std::string error_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

TpuDistWork::TpuDistWork(int rank, c10d::OpType type, std::string what,
                         c10::intrusive_ptr<c10::ivalue::Future> gloo_done, std::function<void()> finish,
                         std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), what_(std::move(what)), outputs_(std::move(outputs)) {
  auto what_copy = what_;
  auto outs = outputs_;
  future_ = gloo_done->then(
      [finish = std::move(finish), outs, what_copy](c10::ivalue::Future& done) -> c10::IValue {
        if (done.hasError()) {
          TORCH_CHECK(false, what_copy, " failed: ", error_text(done.exception_ptr()));
        }
        finish();
        return c10::IValue(outs);
      },
      tensor_list_type());
}

TpuDistWork::TpuDistWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), what_(std::move(what)), outputs_(std::move(outputs)) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(tensor_list_type());
  future_->markCompleted(c10::IValue(outputs_));
}

c10::intrusive_ptr<TpuDistWork> TpuDistWork::Deferred(int rank, c10d::OpType type, std::string what,
                                                      c10::intrusive_ptr<c10d::Work> gloo,
                                                      std::function<void()> finish, std::vector<at::Tensor> outputs) {
  auto w = c10::make_intrusive<TpuDistWork>(rank, type, std::move(what), std::vector<at::Tensor>{});
  w->outputs_ = std::move(outputs);
  w->future_ = c10::make_intrusive<c10::ivalue::Future>(tensor_list_type());
  w->deferred_ = std::move(gloo);
  w->finish_ = std::move(finish);
  return w;
}

void TpuDistWork::finish_deferred() {
  std::lock_guard<std::mutex> lock(mu_);
  if (future_->completed()) return;
  try {
    try {
      deferred_->wait();
    } catch (...) {
      TORCH_CHECK(false, what_, " failed: ", error_text(std::current_exception()));
    }
    finish_();
  } catch (...) {
    future_->setError(std::current_exception());
    return;
  }
  future_->markCompleted(c10::IValue(outputs_));
}

bool TpuDistWork::isCompleted() {
  if (deferred_ && !future_->completed() && deferred_->isCompleted()) finish_deferred();
  return future_->completed();
}

bool TpuDistWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr TpuDistWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

std::vector<at::Tensor> TpuDistWork::result() { return outputs_; }

bool TpuDistWork::wait(std::chrono::milliseconds timeout) {
  if (deferred_) {
    if (timeout != kNoTimeout && !deferred_->isCompleted()) deferred_->wait(timeout);
    finish_deferred();
  }
  if (timeout == kNoTimeout) {
    future_->wait();
  } else {
    // The collective itself fails within the group's timeout; this bounds
    // only how long the caller waits.
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!future_->completed()) {
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline, what_, ": timed out after ", timeout.count(),
                  " ms waiting for the collective");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

CoalescedWork::CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
    : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)) {
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(c10::FutureType::create(tensor_list_type()));
  for (auto& w : works_) futures.push_back(w->getFuture());
  auto outs = result();
  future_ = c10::collectAll(futures)->then(
      [outs](c10::ivalue::Future& all) -> c10::IValue {
        for (const auto& f : all.value().toList()) {
          auto fut = f.get().toFuture();
          if (fut->hasError()) std::rethrow_exception(fut->exception_ptr());
        }
        return c10::IValue(outs);
      },
      tensor_list_type());
}

bool CoalescedWork::isCompleted() {
  bool done = true;
  for (auto& w : works_) done = w->isCompleted() && done;
  return done;
}

std::vector<at::Tensor> CoalescedWork::result() {
  std::vector<at::Tensor> outs;
  for (auto& w : works_) {
    auto r = w->result();
    outs.insert(outs.end(), r.begin(), r.end());
  }
  return outs;
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  for (auto& w : works_) w->wait(timeout);
  return true;
}

}  // namespace tt::backend::dist
