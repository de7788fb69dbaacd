#include "backend/pipeline/graph_executable.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "backend/device/device_storage.h"
#include "backend/pipeline/executor.h"
#include "backend/pipeline/program_runner.h"
#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"
#include "runtime/sha256.h"

namespace tt::backend {

namespace {

lowering::LoweredGraph lower(const lowering::Graph& g, const std::vector<int>& replica_devices) {
  if (replica_devices.empty()) return lowering::lower_graph(g);
  if (g.replicas.num_replicas != static_cast<int>(replica_devices.size()))
    throw lowering::LoweringError("a replicated graph of " + std::to_string(replica_devices.size()) +
                                  " devices needs a replica layout of as many replicas");
  lowering::Graph replicated = g;
  replicated.updates.clear();  // each replica's inputs are its own; no donation across the launch
  lowering::LoweredGraph lowered = lowering::lower_graph(replicated);
  if (lowered.needs_rng)
    throw lowering::LoweringError("a replicated graph draws random numbers (each rank has its own generator)");
  return lowered;
}

}  // namespace

GraphExecutable::GraphExecutable(const lowering::Graph& g, std::string name, std::vector<int> replica_devices)
    : name_(std::move(name)), inputs_(g.inputs), replica_devices_(std::move(replica_devices)) {
  lowering::set_matmul_precision(current_matmul_precision());
  lowering::LoweredGraph lowered = lower(g, replica_devices_);
  text_ = std::move(lowered.module_text);
  outputs_ = std::move(lowered.outputs);
  needs_rng_ = lowered.needs_rng;
  rng_counters_ = lowered.rng_counters;
  aliases_ = std::move(lowered.aliases);
  if (!lowered.checks.empty())
    checks_ = std::make_shared<const std::vector<lowering::CheckInfo>>(std::move(lowered.checks));
  // Identical programs (the same graph compiled twice) share one executable.
  overrides_ = runtime::CurrentCompileOverrides();
  key_ = "graph:" + runtime::ToHex(runtime::Sha256::Of(text_)) + overrides_.key();
  what_ = "graph " + name_ + " (" + std::to_string(g.nodes.size()) + " ops";
  what_ += replica_devices_.empty() ? ")" : ", " + std::to_string(replica_devices_.size()) + " replicas)";
  auto t0 = std::chrono::steady_clock::now();
  executable();
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

runtime::ExecutablePtr GraphExecutable::executable() const {
  if (!replica_devices_.empty()) return replicated_program(text_, replica_devices_, what_);
  if (auto p = find_program(key_, ProgramMode::Graph)) return p->exe;
  // First run, or evicted from the program cache since: compile (again).
  auto p = std::make_shared<CachedProgram>();
  p->exe = compile_program(text_, ProgramMode::Graph, what_, "", &overrides_);
  store_program(key_, ProgramMode::Graph, p);
  return p->exe;
}
std::vector<at::Tensor> GraphExecutable::run(const std::vector<at::Tensor>& inputs) const {
  TORCH_CHECK(replica_devices_.empty(), "tpu graph ", name_, " runs as ", replica_devices_.size(),
              " replicas: use run_replicated");
  TORCH_CHECK(inputs.size() == inputs_.size(), "tpu graph ", name_, ": expected ", inputs_.size(), " inputs, got ",
              inputs.size());
  int device = -1;
  for (const auto& t : inputs) {
    if (!t.defined() || !t.device().is_privateuseone()) continue;
    if (device < 0) device = t.device().index();
    TORCH_CHECK(t.device().index() == device, "Expected all tensors to be on the same device, but found at least two "
                "devices, tpu:", device, " and tpu:", t.device().index(), "!");
  }
  if (device < 0) device = current_device();

  ProgramArgs args;
  for (size_t i = 0; i < inputs.size(); ++i) args.add(input_buffer(inputs[i], i, device));
  if (needs_rng_) args.add_rng(std::nullopt, device, rng_counters_);
  // An updated input's buffer may be donated when the input is all of its
  // storage and only that storage and this call hold the buffer (no other
  // storage shares it, no pending cluster reads it, no other input is it).
  std::vector<bool> rebind(aliases_.size(), false);
  for (size_t k = 0; k < aliases_.size(); ++k) {
    const at::Tensor& t = inputs[aliases_[k].first];
    rebind[k] = t.device().is_privateuseone() && covers_own_storage(t);
    runtime::Buffer* b = args.list()[aliases_[k].first];
    bool sole = rebind[k] && storage_of(t)->buffer.get() == b && storage_of(t)->buffer.use_count() == 2 &&
                std::count(args.list().begin(), args.list().end(), b) == 1;
    args.set_aliased(aliases_[k].first, sole);
  }
  std::vector<runtime::BufferPtr> outs = run_program(*executable(), args, device, what_, checks_);
  for (size_t k = 0; k < aliases_.size(); ++k)
    if (rebind[k]) set_buffer(storage_of(inputs[aliases_[k].first]), outs.at(aliases_[k].second));
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < outs.size(); ++i)
    results.push_back(wrap_buffer(outs[i], outputs_[i].shape,
                                  aten_dtype(outputs_[i].dtype)));
  return results;
}

runtime::BufferPtr GraphExecutable::input_buffer(const at::Tensor& t, size_t i, int device) const {
  const hlo::Type& want = inputs_[i];
  TORCH_CHECK(t.defined(), "tpu graph ", name_, ": input ", i, " is undefined");
  TORCH_CHECK(static_cast<int>(to_element_type(t.scalar_type())) == static_cast<int>(want.dtype) &&
                  t.sizes().vec() == want.shape,
              "tpu graph ", name_, ": input ", i, " is ", t.scalar_type(), t.sizes(), ", but the graph was compiled for ",
              want.str());
  if (t.device().is_privateuseone()) {
    TORCH_CHECK(t.device().index() == device, "tpu graph ", name_, ": input ", i, " is on tpu:", t.device().index(),
                ", but its replica runs on tpu:", device);
    return dense_buffer(t);
  }
  TORCH_CHECK(t.device().is_cpu(), "tpu graph ", name_, ": input ", i, " is on ", t.device());
  at::Tensor host = t.contiguous();
  return runtime_for(device).FromHost(host.const_data_ptr(), to_element_type(t.scalar_type()), t.sizes().vec(),
                                      device);
}

std::vector<std::vector<at::Tensor>> GraphExecutable::run_replicated(
    const std::vector<std::vector<at::Tensor>>& inputs) const {
  const size_t n = replica_devices_.size();
  TORCH_CHECK(n > 0, "tpu graph ", name_, " is a one-device program: call it, not run_replicated");
  TORCH_CHECK(inputs.size() == n, "tpu graph ", name_, ": ", inputs.size(), " argument lists for ", n, " replicas");
  std::vector<runtime::BufferPtr> keep;
  std::vector<std::vector<runtime::Buffer*>> args(n);
  for (size_t r = 0; r < n; ++r) {
    TORCH_CHECK(inputs[r].size() == inputs_.size(), "tpu graph ", name_, ": replica ", r, " has ", inputs[r].size(),
                " inputs, expected ", inputs_.size());
    for (size_t i = 0; i < inputs[r].size(); ++i) {
      keep.push_back(input_buffer(inputs[r][i], i, replica_devices_[r]));
      args[r].push_back(keep.back().get());
    }
  }
  auto outs = run_replicated_program(*executable(), args, what_, checks_);
  std::vector<std::vector<at::Tensor>> results(n);
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < outs[r].size(); ++i)
      results[r].push_back(wrap_buffer(outs[r][i], outputs_[i].shape, aten_dtype(outputs_[i].dtype)));
  return results;
}

}  // namespace tt::backend
