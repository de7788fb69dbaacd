#include "backend/distributed/tpu_dist_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/distributed/host_pool.h"
#include "backend/distributed/host_staging.h"
#include "backend/distributed/inline_collectives.h"
#include "backend/distributed/missing_ranks.h"
#include "backend/distributed/tpu_dist_work.h"
#include "backend/device/pending_work.h"

namespace tt::backend::dist {
namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Exchange capacity bounds, per block (see inline_capacity_): 64 KiB costs
// about as little as the bare signature; up to 1 MiB, carrying the data in
// the exchange beats the signature round trip plus gloo's own collective.
constexpr int64_t kMinInlineBytes = 64 * 1024;
constexpr int64_t kMaxInlineBytes = 1024 * 1024;
// Past this, an all_reduce's host form sends each rank only its share (a
// reduce-scatter in the exchange, then an all-gather of the reduced blocks)
// instead of the whole message to every rank (one round trip, world x the bytes).
constexpr int64_t kWholeReduceBytes = 64 * 1024;
// Broadcast's host form has every rank receive world x the message (gloo's
// broadcast moves it once); past 8 ranks its room shrinks.
constexpr int64_t kMaxReplicatedReceiveBytes = 8 * 1024 * 1024;

int64_t next_capacity(int64_t block_bytes, int64_t limit) {
  if (block_bytes > limit) return kMinInlineBytes;
  return std::max(kMinInlineBytes, (block_bytes + 7) / 8 * 8);
}

// Host form of a reduction whose blocks are each rank's share: this rank's
// result block is the reduction of the rows (one block per rank,
// `out.numel()` elements each) into `out`.
std::function<void(const at::Tensor& rows)> reduce_blocks(const c10d::ReduceOp& op, at::Tensor out) {
  return [out, op](const at::Tensor& rows) mutable { reduce_rows(rows, op, out); };
}

// `t` (contiguous) as bytes, [rows, -1].
at::Tensor byte_rows(const at::Tensor& t, int64_t rows) {
  return t.view({-1}).view(at::kByte).view({rows, -1});
}

std::vector<at::Tensor> to_host_all(const std::vector<at::Tensor>& ts, const char* op) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) {
    check_tpu(t, op);
    out.push_back(to_host(t));
  }
  return out;
}

std::vector<at::Tensor> host_like_all(const std::vector<at::Tensor>& ts, const char* op) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) {
    check_tpu(t, op);
    out.push_back(host_like(t));
  }
  return out;
}

void add_writes(std::vector<std::pair<at::Tensor, at::Tensor>>& writes, const std::vector<at::Tensor>& devices,
                const std::vector<at::Tensor>& hosts) {
  for (size_t i = 0; i < devices.size(); ++i) writes.emplace_back(devices[i], hosts[i]);
}

// The reduction gloo runs for `op` on host copies `hosts`. PREMUL_SUM (which
// gloo lacks) scales each rank's copy by its factor first, then sums.
c10d::ReduceOp host_reduce_op(const c10d::ReduceOp& op, std::vector<at::Tensor>& hosts, const char* name) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return op;
  auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(sup, "tpu_dist ", name, ": PREMUL_SUM without a factor");
  for (auto& h : hosts) {
    TORCH_CHECK(at::isFloatingType(h.scalar_type()), "tpu_dist ", name, ": PREMUL_SUM needs a floating dtype, got ",
                h.scalar_type());
    if (sup->tensor_factor.defined()) h.mul_(sup->tensor_factor.to(at::kCPU).to(h.scalar_type()));
    else h.mul_(sup->double_factor);
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

// A meta tensor carrying only a dtype and shape, for signatures.
at::Tensor shape_of(at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(at::kMeta));
}

void check_same(const at::Tensor& a, const at::Tensor& b, const char* op, const char* what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tpu_dist ", op, ": ", what, " dtypes differ (", a.scalar_type(),
              " and ", b.scalar_type(), ")");
  TORCH_CHECK(a.numel() == b.numel(), "tpu_dist ", op, ": ", what, " sizes differ (", a.sizes(), " and ", b.sizes(),
              ")");
}

std::vector<int64_t> equal_splits(const at::Tensor& t, int world, const char* op) {
  TORCH_CHECK(t.dim() > 0 && t.size(0) % world == 0, "tpu_dist ", op, ": dim 0 of size ",
              t.dim() ? t.size(0) : 0, " does not split evenly over ", world, " ranks");
  return std::vector<int64_t>(world, t.size(0) / world);
}

}  // namespace

TpuDistBackend::TpuDistBackend(c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Store> status,
                               int rank, int size, std::chrono::milliseconds timeout, std::string group)
    : c10d::Backend(rank, size),
      gloo_(std::move(gloo)),
      status_(std::move(status)),
      inline_capacity_(kMinInlineBytes),
      timeout_(timeout),
      group_(std::move(group)) {
  TORCH_CHECK(gloo_ && gloo_->getRank() == rank && gloo_->getSize() == size,
              "tpu_dist: the gloo transport's ranks do not match the group's");
}

void TpuDistBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  gloo_->setTimeout(timeout);
}

int64_t TpuDistBackend::replicated_inline_limit() const {
  return std::clamp(kMaxReplicatedReceiveBytes / getSize(), kMinInlineBytes, kMaxInlineBytes);
}

WorkPtr TpuDistBackend::gather_blocks(const at::Tensor& mine, at::Tensor& out,
                                      std::chrono::milliseconds timeout) const {
  if (mine.numel() == 0) {  // nothing to send: gloo's all_gather handles empty tensors
    c10d::AllgatherOptions ao;
    ao.timeout = timeout;
    at::Tensor in = mine;
    return gloo_->_allgather_base(out, in, ao);
  }
  const int world = getSize();
  const int64_t block = static_cast<int64_t>(mine.nbytes());
  at::Tensor in = pooled_host_tensor({world * block}, at::kByte);
  uint8_t* dst = in.mutable_data_ptr<uint8_t>();
  for (int j = 0; j < world; ++j) std::memcpy(dst + j * block, mine.const_data_ptr(), block);
  at::Tensor received = out.view({-1}).view(at::kByte);
  std::vector<int64_t> even;
  c10d::AllToAllOptions o;
  o.timeout = timeout;
  return gloo_->alltoall_base(received, in, even, even, o);  // its Work keeps both tensors
}

std::string TpuDistBackend::what(const char* op) const {
  return c10::str("tpu_dist ", op, " (rank ", getRank(), " of ", getSize(), ", group '", group_, "')");
}

void TpuDistBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "tpu_dist: a coalescing block is already open");
  coalescing_ = true;
  coalesced_.clear();
}

WorkPtr TpuDistBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "tpu_dist: endCoalescing without startCoalescing");
  coalescing_ = false;
  return c10::make_intrusive<CoalescedWork>(getRank(), std::move(coalesced_));
}

WorkPtr TpuDistBackend::track(WorkPtr w) {
  if (coalescing_) coalesced_.push_back(w);
  return w;
}

WorkPtr TpuDistBackend::run(Plan plan, const std::function<WorkPtr()>& issue) {
  // A collective ends fused eager's pending cluster: what was recorded
  // before it runs before it, so every rank cuts its clusters at the same
  // collectives and issues the same programs in the same order. (A pending
  // input was already run when the plan read it to the host.)
  pending_work::flush("collective");
  const std::string w = what(plan.sig.op);
  const uint64_t seq = ++seq_;
  auto missing = [this, seq] {
    return status_ ? missing_ranks(*status_, getRank(), getSize(), seq, std::chrono::milliseconds(2000)) : "";
  };
  if (agreement_check_enabled()) {
    // Every rank decides alike: the capacity and the plan's host form and
    // payload size follow from arguments the exchange checks.
    const bool host_form = plan.local && plan.block_bytes <= inline_capacity_;
    at::Tensor rows;
    try {
      rows = agree(*gloo_, plan.sig, host_form ? plan.exchange : ExchangeData{}, inline_capacity_, timeout_, w,
                   missing);
    } catch (...) {
      inline_capacity_ = kMinInlineBytes;  // the ranks' plans may differ: start over alike
      throw;
    }
    if (plan.local) inline_capacity_ = next_capacity(plan.block_bytes, plan.inline_limit);
    if (host_form) {
      plan.local(rows);
      for (const auto& wr : plan.writes) write_back(wr.first, wr.second);
      return track(c10::make_intrusive<TpuDistWork>(getRank(), plan.type, w, std::move(plan.outputs)));
    }
  }
  WorkPtr gloo_work = issue();
  bool direct = true;
  for (const auto& wr : plan.writes) direct = direct && direct_write(wr.first);
  auto writes = plan.writes;
  auto unpack = plan.unpack;
  auto finish = [writes, unpack] {
    if (unpack) unpack();
    for (const auto& wr : writes) write_back(wr.first, wr.second);
  };
  c10::intrusive_ptr<c10::ivalue::Future> gloo_done;
  if (direct) {
    try {
      gloo_done = gloo_work->getFuture();
    } catch (const c10::Error&) {
      // gloo's reduce_scatter (list form) has no future: finish below.
    }
  }
  if (gloo_done) {
    return track(c10::make_intrusive<TpuDistWork>(getRank(), plan.type, w, std::move(gloo_done),
                                                  std::move(finish), std::move(plan.outputs)));
  }
  // A write needs a device program (or gloo's Work has no future): finish
  // here, on the issuing thread.
  try {
    gloo_work->wait();
  } catch (...) {
    TORCH_CHECK(false, w, " failed: ", error_text(std::current_exception()));
  }
  finish();
  return track(c10::make_intrusive<TpuDistWork>(getRank(), plan.type, w, std::move(plan.outputs)));
}

WorkPtr TpuDistBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const char* op = "broadcast";
  bool root = getRank() == opts.rootRank;
  auto hosts = root ? to_host_all(tensors, op) : host_like_all(tensors, op);
  Plan p{{op, opts.rootRank, tensors}, c10d::OpType::BROADCAST, {}, tensors, nullptr};
  if (!root) add_writes(p.writes, tensors, hosts);
  if (hosts.size() == 1) {
    at::Tensor h = hosts[0];
    const int src = static_cast<int>(opts.rootRank);
    if (root) p.exchange.data = h;
    p.block_bytes = static_cast<int64_t>(h.nbytes());
    p.inline_limit = replicated_inline_limit();
    p.local = [h, src, root](const at::Tensor& rows) mutable {
      if (!root) h.view({-1}).copy_(row_data(rows, src, h.scalar_type(), h.numel()));
    };
  }
  auto o = opts;
  return run(std::move(p), [&] { return gloo_->broadcast(hosts, o); });
}

WorkPtr TpuDistBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const char* op = "all_reduce";
  auto hosts = to_host_all(tensors, op);
  auto o = opts;
  o.reduceOp = host_reduce_op(opts.reduceOp, hosts, op);
  Plan p{{op, -1, tensors, opts.reduceOp.op_}, c10d::OpType::ALLREDUCE, {}, tensors, nullptr};
  add_writes(p.writes, tensors, hosts);
  if (hosts.size() == 1 && host_reducible(o.reduceOp)) {
    at::Tensor h = hosts[0];
    const int64_t bytes = static_cast<int64_t>(h.nbytes());
    p.exchange.data = h;
    p.inline_limit = kMaxInlineBytes;
    if (bytes <= kWholeReduceBytes) {
      p.block_bytes = bytes;
      p.local = reduce_blocks(o.reduceOp, h);
    } else {
      // Rank j reduces elements [j * share, (j + 1) * share) of every rank's
      // message (the last share is padded), then every rank gathers the
      // reduced shares: each share is combined once, so all ranks get the same bits.
      const int world = getSize();
      const int64_t share = (h.numel() + world - 1) / world;
      p.exchange.split_bytes = share * static_cast<int64_t>(h.element_size());
      p.block_bytes = p.exchange.split_bytes;
      p.local = [this, h, share, world, red = o.reduceOp, w = what(op)](const at::Tensor& rows) mutable {
        const bool exact = share * world == h.numel();
        at::Tensor gathered = exact ? h : pooled_host_tensor({share * world}, h.scalar_type());
        at::Tensor mine = pooled_host_tensor({share}, h.scalar_type());
        const int64_t valid = std::clamp<int64_t>(h.numel() - getRank() * share, 0, share);
        at::Tensor part = mine.narrow(0, 0, valid);
        reduce_rows(rows, red, part);
        try {
          gather_blocks(mine, gathered, timeout_)->wait();
        } catch (...) {
          TORCH_CHECK(false, w, " failed: ", error_text(std::current_exception()));
        }
        if (!exact) h.view({-1}).copy_(gathered.narrow(0, 0, h.numel()));
      };
    }
  }
  return run(std::move(p), [&] { return gloo_->allreduce(hosts, o); });
}

WorkPtr TpuDistBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                            const c10d::AllreduceCoalescedOptions& opts) {
  const char* op = "all_reduce_coalesced";
  auto hosts = to_host_all(tensors, op);
  auto o = opts;
  o.reduceOp = host_reduce_op(opts.reduceOp, hosts, op);
  Plan p{{op, -1, tensors, opts.reduceOp.op_}, c10d::OpType::ALLREDUCE_COALESCED, {}, tensors, nullptr};
  add_writes(p.writes, tensors, hosts);
  return run(std::move(p), [&] { return gloo_->allreduce_coalesced(hosts, o); });
}

WorkPtr TpuDistBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  auto hosts = to_host_all(tensors, op);
  auto o = opts;
  o.reduceOp = host_reduce_op(opts.reduceOp, hosts, op);
  Plan p{{op, opts.rootRank, tensors, opts.reduceOp.op_}, c10d::OpType::REDUCE, {}, tensors, nullptr};
  if (getRank() == opts.rootRank) add_writes(p.writes, tensors, hosts);
  return run(std::move(p), [&] { return gloo_->reduce(hosts, o); });
}

WorkPtr TpuDistBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                  const c10d::AllgatherOptions& opts) {
  const char* op = "all_gather";
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "tpu_dist ", op, ": expects one input tensor");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == getSize(), "tpu_dist ", op, ": expects ", getSize(),
              " output tensors, got ", outputs[0].size());
  for (const auto& t : outputs[0]) check_same(t, inputs[0], op, "output and input");
  auto in = to_host_all(inputs, op);
  std::vector<std::vector<at::Tensor>> outs{host_like_all(outputs[0], op)};
  Plan p{{op, -1, inputs}, c10d::OpType::ALLGATHER, {}, outputs[0], nullptr};
  add_writes(p.writes, outputs[0], outs[0]);
  p.exchange.data = in[0];
  p.block_bytes = static_cast<int64_t>(in[0].nbytes());
  p.inline_limit = kMaxInlineBytes;
  p.local = [outs = outs[0]](const at::Tensor& rows) {
    for (size_t r = 0; r < outs.size(); ++r)
      outs[r].view({-1}).copy_(row_data(rows, static_cast<int>(r), outs[r].scalar_type(), outs[r].numel()));
  };
  // Larger: one all_to_all into a packed buffer, then each rank's part out.
  at::Tensor packed = pooled_host_tensor({getSize() * in[0].numel()}, in[0].scalar_type());
  p.unpack = [packed, world = getSize(), local = p.local] { local(byte_rows(packed, world)); };
  return run(std::move(p), [&] { return gather_blocks(in[0], packed, opts.timeout); });
}

WorkPtr TpuDistBackend::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const char* op = "all_gather_into_tensor";
  check_tpu(input, op);
  check_tpu(output, op);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * getSize(),
              "tpu_dist ", op, ": output must hold ", getSize(), " x the input (", input.scalar_type(),
              input.sizes(), "), got ", output.scalar_type(), output.sizes());
  at::Tensor in = to_host(input), out = host_like(output);
  Plan p{{op, -1, {input}}, c10d::OpType::_ALLGATHER_BASE, {{output, out}}, {output}, nullptr};
  p.exchange.data = in;
  p.block_bytes = static_cast<int64_t>(in.nbytes());
  p.inline_limit = kMaxInlineBytes;
  p.local = [out, numel = in.numel(), world = getSize()](const at::Tensor& rows) {
    auto per_rank = out.view({world, numel});
    for (int r = 0; r < world; ++r) per_rank[r].copy_(row_data(rows, r, out.scalar_type(), numel));
  };
  // Larger: this rank's input to every rank in one gloo all_to_all, straight
  // into the output.
  return run(std::move(p), [&] { return gather_blocks(in, out, opts.timeout); });
}

WorkPtr TpuDistBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                            std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  const char* op = "all_gather_coalesced";
  auto in = to_host_all(inputs, op);
  std::vector<std::vector<at::Tensor>> outs;
  Plan p{{op, -1, inputs}, c10d::OpType::ALLGATHER_COALESCED, {}, {}, nullptr};
  for (auto& list : outputs) {
    outs.push_back(host_like_all(list, op));
    add_writes(p.writes, list, outs.back());
    p.outputs.insert(p.outputs.end(), list.begin(), list.end());
  }
  auto o = opts;
  return run(std::move(p), [&] { return gloo_->allgather_coalesced(outs, in, o); });
}

WorkPtr TpuDistBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  // One gloo all_gather of the inputs packed end to end; the result holds
  // each rank's pack in rank order, unpacked into each output.
  const char* op = "all_gather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist ", op, ": expects as many outputs as inputs");
  const int world = getSize();
  std::vector<int64_t> numels;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tpu(inputs[i], op);
    check_tpu(outputs[i], op);
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type(), "tpu_dist ", op, ": inputs must share a dtype");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                    outputs[i].numel() == inputs[i].numel() * world,
                "tpu_dist ", op, ": output ", i, " must hold ", world, " x input ", i);
    numels.push_back(inputs[i].numel());
  }
  std::vector<at::Tensor> pieces;
  for (auto& t : inputs) pieces.push_back(to_host(t).reshape({-1}));
  at::Tensor in = pieces.empty() ? at::empty({0}) : at::cat(pieces);
  at::Tensor out = at::empty({in.numel() * world}, in.options());
  auto outs = host_like_all(outputs, op);
  Plan p{{op, -1, inputs}, c10d::OpType::COALESCED, {}, outputs, nullptr};
  add_writes(p.writes, outputs, outs);
  p.unpack = [out, outs, numels, world] {
    auto per_rank = out.view({world, -1});
    int64_t offset = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i].view({world, numels[i]}).copy_(per_rank.narrow(1, offset, numels[i]));
      offset += numels[i];
    }
  };
  return run(std::move(p), [&] { return gather_blocks(in, out, opts.timeout); });
}

WorkPtr TpuDistBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                               const c10d::GatherOptions& opts) {
  const char* op = "gather";
  TORCH_CHECK(inputs.size() == 1, "tpu_dist ", op, ": expects one input tensor");
  auto in = to_host_all(inputs, op);
  std::vector<std::vector<at::Tensor>> outs;
  Plan p{{op, opts.rootRank, inputs}, c10d::OpType::GATHER, {}, {}, nullptr};
  if (getRank() == opts.rootRank) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(), "tpu_dist ", op,
                ": the root expects ", getSize(), " output tensors");
    for (const auto& t : outputs[0]) check_same(t, inputs[0], op, "output and input");
    outs.push_back(host_like_all(outputs[0], op));
    add_writes(p.writes, outputs[0], outs[0]);
    p.outputs = outputs[0];
  }
  auto o = opts;
  return run(std::move(p), [&] { return gloo_->gather(outs, in, o); });
}

WorkPtr TpuDistBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                const c10d::ScatterOptions& opts) {
  const char* op = "scatter";
  TORCH_CHECK(outputs.size() == 1, "tpu_dist ", op, ": expects one output tensor");
  auto outs = host_like_all(outputs, op);
  std::vector<std::vector<at::Tensor>> ins;
  if (getRank() == opts.rootRank) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(), "tpu_dist ", op,
                ": the root expects ", getSize(), " input tensors");
    for (const auto& t : inputs[0]) check_same(t, outputs[0], op, "input and output");
    ins.push_back(to_host_all(inputs[0], op));
  }
  Plan p{{op, opts.rootRank, outputs}, c10d::OpType::SCATTER, {}, outputs, nullptr};
  add_writes(p.writes, outputs, outs);
  auto o = opts;
  return run(std::move(p), [&] { return gloo_->scatter(outs, ins, o); });
}

WorkPtr TpuDistBackend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                       const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "tpu_dist ", op, ": expects one output and ", getSize(), " inputs");
  for (const auto& t : inputs[0]) check_same(t, outputs[0], op, "input and output");
  auto outs = host_like_all(outputs, op);
  std::vector<std::vector<at::Tensor>> ins{to_host_all(inputs[0], op)};
  auto o = opts;
  o.reduceOp = host_reduce_op(opts.reduceOp, ins[0], op);
  Plan p{{op, -1, outputs, opts.reduceOp.op_}, c10d::OpType::REDUCE_SCATTER, {}, outputs, nullptr};
  add_writes(p.writes, outputs, outs);
  if (!host_reducible(o.reduceOp)) return run(std::move(p), [&] { return gloo_->reduce_scatter(outs, ins, o); });
  std::vector<at::Tensor> flat;
  for (const auto& h : ins[0]) flat.push_back(h.reshape({-1}));
  return reduce_scatter_blocks(std::move(p), at::cat(flat), outs[0], o.reduceOp, o.timeout);
}

WorkPtr TpuDistBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                             const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor";
  check_tpu(input, op);
  check_tpu(output, op);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() * getSize() == input.numel(),
              "tpu_dist ", op, ": input must hold ", getSize(), " x the output (", output.scalar_type(),
              output.sizes(), "), got ", input.scalar_type(), input.sizes());
  std::vector<at::Tensor> ins{to_host(input)};
  at::Tensor out = host_like(output);
  auto o = opts;
  o.reduceOp = host_reduce_op(opts.reduceOp, ins, op);
  Plan p{{op, -1, {input}, opts.reduceOp.op_}, c10d::OpType::_REDUCE_SCATTER_BASE, {{output, out}}, {output},
         nullptr};
  if (!host_reducible(o.reduceOp)) {
    return run(std::move(p), [&] { return gloo_->_reduce_scatter_base(out, ins[0], o); });
  }
  return reduce_scatter_blocks(std::move(p), ins[0], out, o.reduceOp, o.timeout);
}

WorkPtr TpuDistBackend::reduce_scatter_blocks(Plan p, at::Tensor packed, at::Tensor out, const c10d::ReduceOp& red,
                                              std::chrono::milliseconds timeout) {
  const int64_t block = static_cast<int64_t>(out.nbytes());
  p.exchange = {packed, block};
  p.block_bytes = block;
  p.inline_limit = kMaxInlineBytes;
  p.local = reduce_blocks(red, out);
  // Larger: gloo's all_to_all sends each rank its block of every input,
  // reduced here. Gloo's own reduce_scatter is a ring of 2 (world - 1) steps
  // and takes 2x to 3x its all_reduce of the same buffer here
  // (benchmarks/collectives.py, gloo column); the all_to_all is one step.
  const int world = getSize();
  at::Tensor received = pooled_host_tensor({world * out.numel()}, out.scalar_type());
  p.unpack = [received, world, local = p.local] { local(byte_rows(received, world)); };
  return run(std::move(p), [&] {
    std::vector<int64_t> even;
    c10d::AllToAllOptions ao;
    ao.timeout = timeout;
    at::Tensor recv_bytes = received.view(at::kByte), send_bytes = packed.view({-1}).view(at::kByte);
    return gloo_->alltoall_base(recv_bytes, send_bytes, even, even, ao);
  });
}

WorkPtr TpuDistBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::ReduceScatterOptions& opts) {
  // One gloo reduce_scatter of the inputs repacked rank-major: rank r's
  // block holds every input's r-th shard, end to end.
  const char* op = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist ", op, ": expects as many outputs as inputs");
  const int world = getSize();
  std::vector<int64_t> numels;  // per output
  std::vector<at::Tensor> shards;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tpu(inputs[i], op);
    check_tpu(outputs[i], op);
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type(), "tpu_dist ", op, ": inputs must share a dtype");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                    outputs[i].numel() * world == inputs[i].numel(),
                "tpu_dist ", op, ": input ", i, " must hold ", world, " x output ", i);
    numels.push_back(outputs[i].numel());
    shards.push_back(to_host(inputs[i]).reshape({world, -1}));
  }
  std::vector<at::Tensor> ins{shards.empty() ? at::empty({0}) : at::cat(shards, 1).reshape({-1})};
  int64_t total = std::accumulate(numels.begin(), numels.end(), int64_t{0});
  at::Tensor out = at::empty({total}, ins[0].options());
  auto o = opts;
  o.reduceOp = host_reduce_op(opts.reduceOp, ins, op);
  auto outs = host_like_all(outputs, op);
  Plan p{{op, -1, inputs, opts.reduceOp.op_}, c10d::OpType::COALESCED, {}, outputs, nullptr};
  add_writes(p.writes, outputs, outs);
  p.unpack = [out, outs, numels] {
    int64_t offset = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i].view({-1}).copy_(out.narrow(0, offset, numels[i]));
      offset += numels[i];
    }
  };
  return run(std::move(p), [&] { return gloo_->_reduce_scatter_base(out, ins[0], o); });
}

WorkPtr TpuDistBackend::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                      std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const char* op = "all_to_all_single";
  check_tpu(input, op);
  check_tpu(output, op);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tpu_dist ", op, ": input and output dtypes differ");
  TORCH_CHECK(input.dim() == output.dim() && input.sizes().slice(1) == output.sizes().slice(1), "tpu_dist ", op,
              ": input and output must agree beyond dim 0, got ", input.sizes(), " and ", output.sizes());
  Plan p{{op, -1, {shape_of(input.sizes().slice(1), input.scalar_type())}}, c10d::OpType::ALLTOALL_BASE, {},
         {output}, nullptr};
  p.sig.send_splits = input_splits.empty() ? equal_splits(input, getSize(), op) : input_splits;
  p.sig.recv_splits = output_splits.empty() ? equal_splits(output, getSize(), op) : output_splits;
  at::Tensor in = to_host(input), out = host_like(output);
  p.writes.emplace_back(output, out);
  auto o = opts;
  auto os = output_splits, is = input_splits;
  return run(std::move(p), [&] { return gloo_->alltoall_base(out, in, os, is, o); });
}

WorkPtr TpuDistBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::AllToAllOptions& opts) {
  // One uneven gloo all_to_all over the flattened tensors end to end.
  const char* op = "all_to_all";
  const int world = getSize();
  TORCH_CHECK(static_cast<int>(inputs.size()) == world && static_cast<int>(outputs.size()) == world, "tpu_dist ",
              op, ": expects ", world, " input and output tensors");
  std::vector<int64_t> send, recv;
  std::vector<at::Tensor> pieces;
  for (int i = 0; i < world; ++i) {
    check_tpu(inputs[i], op);
    check_tpu(outputs[i], op);
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "tpu_dist ", op, ": every tensor must have the same dtype");
    send.push_back(inputs[i].numel());
    recv.push_back(outputs[i].numel());
    pieces.push_back(to_host(inputs[i]).reshape({-1}));
  }
  at::Tensor in = at::cat(pieces);
  at::Tensor out = at::empty({std::accumulate(recv.begin(), recv.end(), int64_t{0})}, in.options());
  auto outs = host_like_all(outputs, op);
  Plan p{{op, -1, {shape_of({}, inputs[0].scalar_type())}}, c10d::OpType::ALLTOALL, {}, outputs, nullptr};
  p.sig.send_splits = send;
  p.sig.recv_splits = recv;
  add_writes(p.writes, outputs, outs);
  p.unpack = [out, outs, recv] {
    int64_t offset = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i].view({-1}).copy_(out.narrow(0, offset, recv[i]));
      offset += recv[i];
    }
  };
  auto o = opts;
  return run(std::move(p), [&] { return gloo_->alltoall_base(out, in, recv, send, o); });
}

// Point to point: there is no group-wide step to agree in, so no signature
// check. Gloo's send completes only once the peer posts the matching recv,
// so both finish in the Work's wait() (tpu_dist_work.h: deferred).
WorkPtr TpuDistBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  auto hosts = to_host_all(tensors, "send");
  WorkPtr w = gloo_->send(hosts, dst, tag);
  return track(TpuDistWork::Deferred(getRank(), c10d::OpType::SEND, c10::str(what("send"), " to rank ", dst), w,
                               [hosts] {}, tensors));
}

WorkPtr TpuDistBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  auto hosts = host_like_all(tensors, "recv");
  WorkPtr w = gloo_->recv(hosts, src, tag);
  auto finish = [tensors, hosts] {
    for (size_t i = 0; i < tensors.size(); ++i) write_back(tensors[i], hosts[i]);
  };
  return track(TpuDistWork::Deferred(getRank(), c10d::OpType::RECV, c10::str(what("recv"), " from rank ", src),
                                     w, finish, tensors));
}

WorkPtr TpuDistBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  auto hosts = host_like_all(tensors, "recv");
  WorkPtr w = gloo_->recvAnysource(hosts, tag);
  auto finish = [tensors, hosts] {
    for (size_t i = 0; i < tensors.size(); ++i) write_back(tensors[i], hosts[i]);
  };
  return track(TpuDistWork::Deferred(getRank(), c10d::OpType::RECVANYSOURCE, what("recv from any rank"), w,
                                     finish, tensors));
}

WorkPtr TpuDistBackend::barrier(const c10d::BarrierOptions& opts) {
  Plan p{{"barrier", -1, {}}, c10d::OpType::BARRIER, {}, {}, nullptr};
  c10d::BarrierOptions o;
  o.timeout = opts.timeout;
  return run(std::move(p), [&] { return gloo_->barrier(o); });
}

}  // namespace tt::backend::dist
