// Fused eager mode: instead of running each ATen call as its own program,
// calls are recorded into one pending cluster, a lowering::Graph lowered by
// lower_graph (the same rules, one StableHLO module), compiled once per op
// sequence and shapes, and run as one program when
//   - a value is observed (a copy to the host, .item(), a CPU fallback, a
//     compiled graph: anything that asks storage_contents.h for a buffer),
//   - the cluster reaches its size limit (TORCH_TPU_FUSED_MAX_OPS, 512),
//   - torch.tpu.synchronize() or the end of a backward pass,
//   - an event record or a change of the current stream (stream_events.h),
//   - a random call that does not continue the cluster's counter range (another
//     generator, a new seed), or a change of matmul precision,
//   - or the eager mode changes.
// Results of the cluster that no tensor holds any more are never computed
// into buffers (XLA fuses them away). Shape and argument errors still raise at
// the call that caused them: PyTorch's meta kernels and the rule run when the
// call is recorded.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <memory>
#include <string>

#include "backend/pipeline/call_record.h"
#include "backend/pipeline/op_program.h"
#include "lowering/helpers.h"

namespace tt::backend::fused {

// "fused" (the default) or "strict" (op by op); TORCH_TPU_EAGER_MODE, read at first use.
void set_mode(const std::string& mode);
std::string mode();
// Fused mode is on and calls should be recorded (never under
// TORCH_TPU_LAUNCH_BLOCKING=1, see program_runner.h).
bool recording();
// The generation of the cluster being recorded (see PendingValue::cluster).
uint64_t generation();

// Records one call (its arguments encoded with deferral into `st`, its
// lowering described by `meta`) and replaces its arguments on `stack` with
// result tensors whose contents are pending.
void record(const OpPlan& plan, torch::jit::Stack* stack, size_t num_args, CallState& st, const std::string& key,
            std::shared_ptr<OpMeta> meta, lowering::MatmulPrecision precision);

// Compiles (or finds) and runs the pending cluster; `reason` is counted.
void flush(const char* reason);

// Recording counters; the cluster programs' compiles and cache hits are the
// program runner's (ProgramMode::Fused).
struct Stats {
  int64_t ops = 0, clusters = 0, empty = 0;
  std::map<std::string, int64_t> flush_reasons;
  int64_t pending_ops = 0;
};
Stats stats();
void reset_stats();

}  // namespace tt::backend::fused
