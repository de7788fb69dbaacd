#include "backend/pipeline/cpu_fallback.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "backend/pipeline/eager_decomposition.h"
#include "settings/settings.h"

namespace tt::backend {

namespace {
std::mutex g_mu;
std::map<std::string, int64_t> g_counts;
std::set<std::string> g_warned;

// TORCH_TPU_FALLBACK, read at first use (a bad value is that call's error).
std::string& g_mode() {
  static std::string mode = settings::Enum(settings::Id::TORCH_TPU_FALLBACK);
  return mode;
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// Ops without a rule: PyTorch's decomposition on tpu when every op it needs
// is native (eager_decomposition.h), else the CPU.
void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string why;
  if (try_eager_decomposition(op, stack, &why)) return;
  run_cpu_fallback(op, stack, why.empty() ? "no lowering rule" : "no lowering rule; " + why);
}
}  // namespace

void set_fallback_mode(const std::string& mode) {
  TORCH_CHECK_VALUE(mode == "warn" || mode == "error" || mode == "silent",
                    "fallback mode must be 'warn', 'error' or 'silent', got '", mode, "'");
  std::lock_guard<std::mutex> lock(g_mu);
  g_mode() = mode;
}

std::string fallback_mode() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_mode();
}

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason) {
  std::string name = op_name(op);
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    TORCH_CHECK_NOT_IMPLEMENTED(g_mode() != "error", "tpu: ", name, " would fall back to the CPU (", reason,
                                ") and TORCH_TPU_FALLBACK=error forbids it");
    g_counts[name] += 1;
    warn = g_mode() == "warn" && g_warned.insert(name).second;
  }
  if (warn)
    TORCH_WARN("tpu: ", name, " runs on the CPU (", reason,
               "); results are correct but slow. torch_tpu.fallback_ops() lists such ops.");
  at::native::cpu_fallback(op, stack);
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts.clear();
  g_warned.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
}

}  // namespace tt::backend
