// tpu_dist: the c10d backend for tpu tensors (registered from
// torch_tpu/distributed). On the CPU plugin, which has no collectives
// between processes, it carries every collective over a gloo backend on the
// same store, with host copies (backend/distributed/host_staging.h): read the tpu
// values to the host, run gloo's collective, write the results back into
// the tpu tensors' storages in place. JAX does the same for multi-process
// CPU. Before moving data the ranks agree on their arguments
// (backend/distributed/agreement_check.h), so a mismatch raises instead of hanging;
// a collective of up to 1 MiB per block moves its data in that same
// exchange and each host computes its result (backend/distributed/
// inline_collectives.h): one gloo round trip (two for an all_reduce above
// 64 KiB). Larger data moves after the check; gloo's all_to_all carries
// all_gather and reduce_scatter (one step, where gloo's rings take world - 1).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/distributed/agreement_check.h"

namespace tt::backend::dist {

class TpuDistBackend : public c10d::Backend {
 public:
  // `gloo` is a gloo Backend of the same ranks, on its own store prefix;
  // `status` a store prefix of the group's own (backend/distributed/missing_ranks.h);
  // `timeout` is the group's; `group` names the group in messages.
  TpuDistBackend(c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Store> status, int rank,
                 int size, std::chrono::milliseconds timeout, std::string group);

  const std::string getBackendName() const override { return "tpu_dist"; }

  // torch.distributed.set_timeout: collectives issued after this call, and
  // the gloo transport under them, wait at most `timeout`.
  void setTimeout(std::chrono::milliseconds timeout) override;

  // A coalescing block (_coalescing_manager with a device): collectives
  // inside it run as issued; endCoalescing returns one Work for them all.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // One collective over gloo: its arguments' signature, the host copies
  // it writes (device tensor, host tensor), and an optional host step run
  // after gloo and before the write-back (unpacking a packed result).
  struct Plan {
    Signature sig;
    c10d::OpType type = c10d::OpType::UNKNOWN;
    std::vector<std::pair<at::Tensor, at::Tensor>> writes;
    std::vector<at::Tensor> outputs;  // the Work's result and future value
    std::function<void()> unpack;
    // The host form (inline_collectives.h), where the collective has one:
    // `local` sets the writes' host values from the exchanged rows (row r:
    // the block rank r sent here); `exchange` is the data this rank sends;
    // `block_bytes` the largest block any rank sends (the same on every
    // rank); `inline_limit` the largest block worth carrying in the exchange.
    std::function<void(const at::Tensor& rows)> local;
    ExchangeData exchange;
    int64_t block_bytes = 0;
    int64_t inline_limit = 0;
  };
  // Checks agreement, issues `issue` (which starts gloo on the host copies)
  // and returns the Work (tpu_dist_work.h).
  c10::intrusive_ptr<c10d::Work> run(Plan plan, const std::function<c10::intrusive_ptr<c10d::Work>()>& issue);
  // The largest message worth sending whole to every rank in the exchange
  // (broadcast): every rank receives world x the message.
  int64_t replicated_inline_limit() const;
  // A reduce_scatter with a host form: `packed` holds this rank's input,
  // block j for rank j (contiguous, world x `out`); `out` gets this rank's
  // reduced block.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_blocks(Plan p, at::Tensor packed, at::Tensor out,
                                                       const c10d::ReduceOp& red, std::chrono::milliseconds timeout);
  // Starts the all-gather of this rank's block `mine` (contiguous) into
  // `out` (contiguous, world blocks end to end) as one gloo all_to_all that
  // sends `mine` to every rank (gloo's all_gather is a ring of world - 1
  // steps; an all_to_all posts every peer's transfer at once). The ranks
  // must already agree on the sizes.
  c10::intrusive_ptr<c10d::Work> gather_blocks(const at::Tensor& mine, at::Tensor& out,
                                               std::chrono::milliseconds timeout) const;
  // "tpu_dist all_reduce (rank 0 of 2, group default_pg)", for messages.
  std::string what(const char* op) const;
  // Records `w` in the open coalescing block, if any; returns it.
  c10::intrusive_ptr<c10d::Work> track(c10::intrusive_ptr<c10d::Work> w);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::intrusive_ptr<c10d::Store> status_;
  uint64_t seq_ = 0;  // collectives issued (the same count on every rank)
  // The data bytes each rank's exchange slot carries. The same on every
  // rank: it follows the last agreed collective's size (loops repeat their
  // collectives), between kMinInlineBytes and kMaxInlineBytes.
  int64_t inline_capacity_;
  std::chrono::milliseconds timeout_;
  std::string group_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
};

}  // namespace tt::backend::dist
