#include "backend/graph_executable.h"

#include <ATen/ATen.h>

#include <chrono>

#include "backend/device_storage.h"
#include "backend/executor.h"
#include "backend/generator.h"
#include "backend/tpu_device.h"

namespace tt::backend {

GraphExecutable::GraphExecutable(const lowering::Graph& g, std::string name)
    : name_(std::move(name)), inputs_(g.inputs) {
  lowering::set_matmul_precision(current_matmul_precision());
  lowering::LoweredGraph lowered = lowering::lower_graph(g);
  text_ = std::move(lowered.module_text);
  outputs_ = std::move(lowered.outputs);
  needs_rng_ = lowered.needs_rng;
  rng_counters_ = lowered.rng_counters;
  auto t0 = std::chrono::steady_clock::now();
  try {
    exe_ = runtime::Runtime::Get().Compile(text_);
  } catch (const runtime::Error& e) {
    TORCH_CHECK(false, "tpu: XLA could not compile graph ", name_, " (", g.nodes.size(), " ops): ", e.what(),
                getenv("TORCH_TPU_DUMP_FAILED") ? "\n" + text_ : "");
  }
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

  std::vector<runtime::BufferPtr> keep;
  std::vector<runtime::Buffer*> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const hlo::Type& want = inputs_[i];
    TORCH_CHECK(t.defined(), "tpu graph ", name_, ": input ", i, " is undefined");
    TORCH_CHECK(static_cast<int>(to_element_type(t.scalar_type())) == static_cast<int>(want.dtype) &&
                    t.sizes().vec() == want.shape,
                "tpu graph ", name_, ": input ", i, " is ", t.scalar_type(), t.sizes(), ", but the graph was compiled for ",
                want.str());
    if (t.device().is_privateuseone()) {
      keep.push_back(dense_buffer(t));
    } else {
      TORCH_CHECK(t.device().is_cpu(), "tpu graph ", name_, ": input ", i, " is on ", t.device());
      at::Tensor host = t.contiguous();
      keep.push_back(rt.FromHost(host.const_data_ptr(), to_element_type(t.scalar_type()), t.sizes().vec(), device));
    }
    args.push_back(keep.back().get());
  }
  if (needs_rng_) {
    TpuGenerator* gen = generator_or_default(std::nullopt, device);
    std::lock_guard<std::mutex> lock(gen->mutex_);
    uint64_t seed = gen->current_seed();
    uint64_t offset = gen->reserve(static_cast<uint64_t>(rng_counters_));
    keep.push_back(rt.FromHost(&seed, runtime::ElementType::U64, {}, device));
    args.push_back(keep.back().get());
    keep.push_back(rt.FromHost(&offset, runtime::ElementType::U64, {}, device));
    args.push_back(keep.back().get());
  }
  std::vector<runtime::BufferPtr> outs;
  try {
    outs = exe_->Execute(args, device);
  } catch (const runtime::Error& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), "tpu:", device, " out of memory running graph ", name_,
                     ": ", e.what());
    TORCH_CHECK(false, "tpu: running graph ", name_, " failed: ", e.what());
  }
  if (!outs.empty()) track_pending(outs.back());
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < outs.size(); ++i)
    results.push_back(wrap_buffer(outs[i], outputs_[i].shape,
                                  to_scalar_type(static_cast<runtime::ElementType>(outputs_[i].dtype))));
  return results;
}

}  // namespace tt::backend
