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

GraphExecutable::GraphExecutable(const lowering::Graph& g, std::string name)
    : name_(std::move(name)), inputs_(g.inputs) {
  lowering::set_matmul_precision(current_matmul_precision());
  lowering::LoweredGraph lowered = lowering::lower_graph(g);
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
  what_ = "graph " + name_ + " (" + std::to_string(g.nodes.size()) + " ops)";
  auto t0 = std::chrono::steady_clock::now();
  executable();
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

runtime::ExecutablePtr GraphExecutable::executable() const {
  if (auto p = find_program(key_, ProgramMode::Graph)) return p->exe;
  // First run, or evicted from the program cache since: compile (again).
  auto p = std::make_shared<CachedProgram>();
  p->exe = compile_program(text_, ProgramMode::Graph, what_, "", &overrides_);
  store_program(key_, ProgramMode::Graph, p);
  return p->exe;
}
std::vector<at::Tensor> GraphExecutable::run(const std::vector<at::Tensor>& inputs) const {
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
  auto& rt = runtime_for(device);

  ProgramArgs args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const hlo::Type& want = inputs_[i];
    TORCH_CHECK(t.defined(), "tpu graph ", name_, ": input ", i, " is undefined");
    TORCH_CHECK(static_cast<int>(to_element_type(t.scalar_type())) == static_cast<int>(want.dtype) &&
                    t.sizes().vec() == want.shape,
                "tpu graph ", name_, ": input ", i, " is ", t.scalar_type(), t.sizes(), ", but the graph was compiled for ",
                want.str());
    if (t.device().is_privateuseone()) {
      args.add(dense_buffer(t));
    } else {
      TORCH_CHECK(t.device().is_cpu(), "tpu graph ", name_, ": input ", i, " is on ", t.device());
      at::Tensor host = t.contiguous();
      args.add(rt.FromHost(host.const_data_ptr(), to_element_type(t.scalar_type()), t.sizes().vec(), device));
    }
  }
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

}  // namespace tt::backend
