// The CPU fallback for ops without a lowering rule: correct results through
// PyTorch's CPU kernels, counted per op, warned about once, listed by
// torch_tpu.fallback_ops(), and an error under TORCH_TPU_FALLBACK=error.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <string>

namespace tt::backend {

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason);
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();
// "warn" (default), "error" or "silent"; TORCH_TPU_FALLBACK, read at first use.
void set_fallback_mode(const std::string& mode);
std::string fallback_mode();

}  // namespace tt::backend
