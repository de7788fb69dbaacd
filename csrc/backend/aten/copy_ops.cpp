// copy_ in every direction, and item(). Host <-> tpu copies move whole dense
// buffers; anything strided, broadcast or dtype-converting on the tpu side is
// a program (the executor's aten::copy rule).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdlib>
#include <string>

#include "backend/device/device_storage.h"
#include "backend/pipeline/executor.h"
#include "backend/pipeline/program_runner.h"
#include "backend/profiler/device_trace.h"
#include "backend/device/storage_contents.h"
#include "backend/device/stream_events.h"
#include "backend/device/tpu_device.h"
#include "lowering/view.h"
#include "settings/settings.h"

namespace tt::backend {
namespace {

const OpPlan& copy_plan() {
  static OpPlan plan = [] {
    auto& d = c10::Dispatcher::singleton();
    OpPlan p;
    p.functional = "aten::copy";
    p.rule = lowering::find_rule("aten::copy");
    TORCH_CHECK(p.rule, "tpu: the aten::copy lowering rule is missing");
    p.mode = Mode::Inplace;
    p.functional_op = d.findSchemaOrThrow("aten::copy", "");
    return p;
  }();
  return plan;
}

// self (tpu) <- src (tpu, same device): one program.
void device_copy(const at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  static c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  torch::jit::Stack stack{self, src, non_blocking};
  execute(copy_plan(), op, &stack);
}

// Whether the tensor is its storage's values as they are: not a lazy
// conjugate or negative view (is_conj(), is_neg()).
bool plain_values(const at::Tensor& t) { return !t.is_conj() && !t.is_neg(); }

// Whether non_blocking uploads return before the plugin has read the host
// memory. Off for plugins that copy during the call anyway (the CPU plugin),
// where it would only add the private copy below. TORCH_TPU_ASYNC_UPLOADS=1
// or 0 overrides (1 lets the CPU plugin exercise the asynchronous path).
bool async_uploads(runtime::Runtime& rt) {
  static const bool on = [&] {
    return settings::OptionalBool(settings::Id::TORCH_TPU_ASYNC_UPLOADS).value_or(!rt.host_copy_in_call());
  }();
  return on;
}

// Host tensor -> tpu tensor. With non_blocking (where async_uploads), returns
// once the transfer is issued; the host memory stays alive (and unchanged)
// until the plugin is done reading it. As for CUDA's copies from pageable
// memory, the caller may reuse `src` at once: when the dense host tensor
// would be `src` itself, the transfer reads a private copy.
void upload(const at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  // Convert and broadcast on the host, then move one dense buffer.
  at::Tensor host = src.to(self.scalar_type()).expand(self.sizes()).contiguous().resolve_conj().resolve_neg();
  int dev = self.device().index();
  auto& rt = runtime_for(dev);
  auto type = to_element_type(self.scalar_type());
  runtime::BufferPtr buf;
  int64_t traced_from = profiler::recording() ? profiler::now_ns() : 0;
  if (non_blocking && async_uploads(rt)) {
    if (host.storage().is_alias_of(src.storage())) host = host.clone();
    auto owner = std::make_shared<at::Tensor>(host);
    buf = rt.FromHostAsync(host.const_data_ptr(), type, self.sizes().vec(), dev, std::move(owner));
    track_pending(buf);
  } else {
    buf = rt.FromHost(host.const_data_ptr(), type, self.sizes().vec(), dev);
  }
  if (traced_from)  // the call's own time: the copy into the plugin's buffer
    profiler::record_copy(profiler::EventKind::HostToDevice, dev, static_cast<int64_t>(host.nbytes()), traced_from,
                          profiler::now_ns());
  if (covers_own_storage(self) && plain_values(self)) {
    set_buffer(storage_of(self), std::move(buf));
    return;
  }
  device_copy(self, wrap_buffer(std::move(buf), self.sizes(), self.scalar_type()), non_blocking);
}

// tpu tensor -> host tensor. Synchronous even with non_blocking: the host
// tensor is pageable memory that the caller may read as soon as copy_
// returns (CUDA copies to pageable memory are synchronous too).
void download(const at::Tensor& self, const at::Tensor& src) {
  runtime::BufferPtr buf = dense_buffer(src);
  verify_device_checks();  // the host waits here: raise what earlier programs found
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  int64_t traced_from = 0;
  if (profiler::recording()) {  // the copy alone, not the wait for the program that computes `buf`
    buf->BlockUntilReady();
    traced_from = profiler::now_ns();
  }
  buf->ToHost(host.mutable_data_ptr(), host.nbytes());
  if (traced_from)
    profiler::record_copy(profiler::EventKind::DeviceToHost, buf->device(), static_cast<int64_t>(host.nbytes()),
                          traced_from, profiler::now_ns());
  self.copy_(host);
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.defined() && src.defined(), "copy_: undefined tensor");
  if (self.numel() == 0) return self;
  if (src.is_complex() && !self.is_complex())  // as PyTorch's copy_ warns
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
  bool self_tpu = self.device().is_privateuseone(), src_tpu = src.device().is_privateuseone();
  if (self_tpu && src_tpu) {
    if (self.device() == src.device()) {
      if (self.scalar_type() == src.scalar_type() && self.sizes() == src.sizes() && covers_own_storage(self) &&
          plain_values(self) && plain_values(src)) {
        // The whole storage takes src's values: share src's (immutable)
        // buffer (or pending value), no program. AOTAutograd's write-back
        // of mutated parameters after a compiled optimizer step is this case.
        at::Tensor dense = dense_tensor(src);
        share_contents(storage_of(self), storage_of(dense));
        return self;
      }
      device_copy(self, src, non_blocking);
    } else {
      // Across devices: a dense buffer moves device to device, then converts.
      runtime::BufferPtr buf = dense_buffer(src);
      int dev = self.device().index();
      auto moved = runtime_for(dev).CopyToDevice(*buf, dev);
      device_copy(self, wrap_buffer(std::move(moved), src.sizes(), src.scalar_type()), non_blocking);
    }
  } else if (self_tpu) {
    TORCH_CHECK(src.device().is_cpu(), "copy_ from ", src.device(), " to tpu is not supported");
    upload(self, src, non_blocking);
  } else {
    TORCH_CHECK(self.device().is_cpu(), "copy_ from tpu to ", self.device(), " is not supported");
    download(self, src);
  }
  return self;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  download(host, self);
  return host.item();
}

// Used by the CPU fallback to move results back into tpu tensors.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = dst;
  copy_(d, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  at::Tensor d = dst;
  copy_(d, self, false);
  return dst;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("copy_", copy_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

}  // namespace
}  // namespace tt::backend
