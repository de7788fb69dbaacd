#include "backend/pipeline/executor.h"
#include "backend/pipeline/compile_settings.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/ScalarType.h>

#include <algorithm>

#include "backend/pipeline/call_record.h"
#include "backend/pipeline/cpu_fallback.h"
#include "backend/pipeline/eager_decomposition.h"
#include "backend/pipeline/fused_cluster.h"
#include "backend/pipeline/index_arguments.h"
#include "backend/pipeline/op_program.h"
#include "backend/pipeline/program_runner.h"
#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"
#include "lowering/helpers.h"
#include "lowering/view.h"

namespace tt::backend {

namespace {

// The n-th tensor operand's record (Tensor arguments and TensorList
// elements in schema order, Nones left out), or null.
const ArgRecord* tensor_operand(const std::vector<ArgRecord>& records, int n) {
  for (const auto& r : records) {
    if (r.kind == lowering::Arg::Kind::Tensor) {
      if (n-- == 0) return &r;
    } else if (r.kind == lowering::Arg::Kind::TensorList) {
      for (const auto& e : r.elems)
        if (e.kind == lowering::Arg::Kind::Tensor && n-- == 0) return &e;
    }
  }
  return nullptr;
}

// A donated operand (OpMeta::donations) whose view is all of its storage's
// buffer, read by no other operand, gives that buffer to its result.
void alias_donations(hlo::Builder& b, const CallState& st, CachedProgram& p) {
  for (const auto& [operand, result] : p.meta->donations) {
    const ArgRecord* r = tensor_operand(st.records, operand);
    if (!r || r->storage < 0 || result < 0 || result >= static_cast<int>(p.meta->outputs.size())) continue;
    const hlo::Type& param = b.param_types().at(r->storage);
    const Output& out = p.meta->outputs[result];
    if (param.dtype != out.dtype || param.shape != out.sizes || r->dtype != param.dtype ||
        !lowering::covers_storage(r->view, lowering::numel(param.shape)))
      continue;
    int readers = 0;
    for (const auto& other : st.records) {
      readers += other.storage == r->storage;
      for (const auto& e : other.elems) readers += e.storage == r->storage;
    }
    bool taken = false;
    for (const auto& d : p.donated) taken |= d.first == r->storage || d.second == result;
    if (readers != 1 || taken) continue;
    b.alias_param(r->storage, result);
    p.aliased_params.push_back(r->storage);
    p.donated.emplace_back(r->storage, result);
  }
}

// Lowers the call into a one-call program and compiles it.
std::shared_ptr<CachedProgram> build_program(const OpPlan& plan, const c10::OperatorHandle& op,
                                             c10::ArrayRef<c10::IValue> args, const CallState& st) {
  auto p = std::make_shared<CachedProgram>();
  hlo::Builder b;
  ProgramInputs in = declare_inputs(b, st, plan.rule->needs_rng);
  hlo::Values results;
  p->meta = lower_op(b, in, plan, op, args, st, &results);
  b.set_results(results);
  if (plan.mode == Mode::Inplace) {
    // The written storage's new contents may take its old buffer's place.
    int self = st.records.at(0).storage;
    if (self >= 0 && !results.empty() && b.param_types().at(self) == results[0].type) {
      b.alias_param(self, 0);
      p->aliased_params.push_back(self);
    }
  }
  if (plan.mode == Mode::Functional) alias_donations(b, st, *p);
  p->exe = compile_program(b.module_text(), ProgramMode::Eager, p->meta->producer);
  return p;
}

}  // namespace

lowering::MatmulPrecision current_matmul_precision() {
  if (int p = matmul_precision_override(); p >= 0) return static_cast<lowering::MatmulPrecision>(p);
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGH: return lowering::MatmulPrecision::High;
    case at::Float32MatmulPrecision::MEDIUM: return lowering::MatmulPrecision::Medium;
    default: return lowering::MatmulPrecision::Highest;
  }
}

at::Tensor dense_tensor(const at::Tensor& t) {
  DeviceStorage* s = storage_of(t);
  hlo::Type contents;
  if (!contents_type(s, &contents)) {
    storage_buffer(s, t.scalar_type());  // torch.empty: zeros
    contents_type(s, &contents);
  }
  int64_t storage_numel = static_cast<int64_t>(s->nbytes / t.element_size());
  lowering::View v{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
  if (!t.is_conj() && !t.is_neg() && contents.dtype == hlo_dtype(t.scalar_type()) && lowering::covers_storage(v, storage_numel) &&
      lowering::numel(contents.shape) == storage_numel)
    return t;
  return at::clone(t, at::MemoryFormat::Contiguous);
}

runtime::BufferPtr dense_buffer(const at::Tensor& t) {
  at::Tensor d = dense_tensor(t);
  return storage_buffer(storage_of(d), d.scalar_type());
}

namespace {

// Finds the call's program, or lowers it (and, unless it is only to be
// recorded, compiles it). Returns null when the rule declined the call and it
// ran as its decomposition or on the CPU instead.
std::shared_ptr<CachedProgram> find_or_build(const OpPlan& plan, const c10::OperatorHandle& op,
                                             c10::ArrayRef<c10::IValue> args, const CallState& st,
                                             const std::string& key, bool record_only,
                                             lowering::MatmulPrecision precision, torch::jit::Stack* stack) {
  std::shared_ptr<CachedProgram> p = find_program(key, ProgramMode::Eager, /*need_exe=*/!record_only);
  if (p) return p;
  try {
    lowering::set_matmul_precision(precision);
    if (record_only) {
      // Fused eager: the call is lowered now (its errors raise here), and
      // compiled later as part of its cluster.
      p = std::make_shared<CachedProgram>();
      hlo::Builder scratch;
      ProgramInputs in = declare_inputs(scratch, st, plan.rule->needs_rng);
      hlo::Values results;
      p->meta = lower_op(scratch, in, plan, op, args, st, &results);
    } else {
      p = build_program(plan, op, args, st);
    }
  } catch (const lowering::LoweringError& e) {
    // The rule declines these arguments: PyTorch's decomposition, else the CPU.
    std::string why;
    if (try_eager_decomposition(op, stack, &why)) return nullptr;
    run_cpu_fallback(op, stack, std::string("lowering declined: ") + e.what() + (why.empty() ? "" : "; " + why));
    return nullptr;
  } catch (const lowering::InvalidArgument& e) {
    TORCH_CHECK(false, e.what());
  } catch (const lowering::NotImplementedForDtype& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const hlo::BuildError& e) {
    TORCH_CHECK(false, "tpu: internal error lowering ", plan.functional, " for (", describe_args(st), "): ", e.what());
  }
  store_program(key, ProgramMode::Eager, p);
  return p;
}

}  // namespace

void execute(const OpPlan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  {
    // Index tensors on the CPU move to the device first (as on CUDA).
    // Boolean masks in advanced indexing have data-dependent shapes; they
    // become integer indices first, except x[mask] = one value (a select).
    c10::IValue* a = &(*stack)[stack->size() - n];
    bool reads = plan.mask_indexing == MaskIndexing::Read;
    bool writes = plan.mask_indexing == MaskIndexing::Write;
    if ((reads || writes) && a[0].isTensor() && a[0].toTensor().device().is_privateuseone())
      indices_to_device(a[0].toTensor(), a[1]);
    if ((reads || (writes && a[2].isTensor() && a[2].toTensor().numel() != 1)) && a[0].isTensor())
      expand_bool_indices(a[0].toTensor(), a[1]);
  }
  auto args = torch::jit::last(*stack, n);

  const bool record = fused::recording();
  CallState st;
  std::string key;
  key.reserve(256);
  key += plan.functional;
  key += plan.mode == Mode::Inplace ? "!" : ":";
  const auto precision = current_matmul_precision();
  key += static_cast<char>('0' + static_cast<int>(precision));
  key += runtime::CurrentCompileOverrides().key();  // compiled with them (program_runner.h)
  encode_call(schema, args, plan.rule->static_scalars, record, st, key);

  std::shared_ptr<CachedProgram> program = find_or_build(plan, op, args, st, key, record, precision, stack);
  if (!program) return;  // ran as its decomposition or on the CPU
  if (record) {
    fused::record(plan, stack, n, st, key, program->meta, precision);
    return;
  }
  const OpMeta& meta = *program->meta;

  const int device = st.device;
  ProgramArgs inputs;
  for (const auto& s : st.storages) inputs.add(s.buffer.get());
  for (const auto& s : st.scalars) inputs.add(scalar_buffer(s, device));
  std::vector<int> given;  // aliased parameters whose buffers are donated
  for (int param : program->aliased_params) {
    // Donated only when the written storage alone holds its buffer (the
    // CallState's reference aside): no other storage shares it, no pending
    // work reads it.
    const StorageUse& self = st.storages[param];
    bool give = self.storage->buffer == self.buffer && self.buffer.use_count() == 2;
    inputs.set_aliased(param, give);
    if (give) given.push_back(param);
  }
  if (meta.needs_rng) inputs.add_rng(st.generator, device, meta.rng_counters);
  std::vector<runtime::BufferPtr> outs = run_program(*program->exe, inputs, device, meta.producer, meta.checks);
  for (const auto& [param, result] : program->donated) {
    // The donated operand's storage now holds its result (its old buffer
    // is gone), as when the kernel wrote the result into it.
    // A shared buffer was copied by XLA instead, and the operand keeps it.
    if (std::find(given.begin(), given.end(), param) != given.end())
      set_buffer(st.storages[param].storage, outs.at(result));
  }

  if (plan.mode == Mode::Inplace) {
    set_buffer(st.storages[st.records[0].storage].storage, outs.at(0));
    c10::IValue self = args[0];
    torch::jit::drop(*stack, n);
    stack->push_back(std::move(self));
    return;
  }
  torch::jit::drop(*stack, n);
  push_results(stack, meta, [&](size_t j) {
    const Output& o = meta.outputs[j];
    return wrap_buffer(outs[j], o.sizes, aten_dtype(o.dtype));
  });
}

void execute_out(const c10::OperatorHandle& functional_op, const c10::OperatorHandle& op,
                 torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  auto args = torch::jit::last(*stack, n);
  std::vector<c10::IValue> outs;
  for (size_t i = 0; i < n; ++i)
    if (schema.arguments()[i].is_out()) outs.push_back(args[i]);
  // The functional op's arguments by name; a factory's dtype and device come
  // from the (first) out tensor, its layout and pin_memory are left unset.
  torch::jit::Stack inner;
  for (const auto& fa : functional_op.schema().arguments()) {
    bool found = false;
    for (size_t i = 0; i < n && !found; ++i) {
      if (schema.arguments()[i].is_out() || schema.arguments()[i].name() != fa.name()) continue;
      inner.push_back(args[i]);
      found = true;
    }
    if (found) continue;
    const at::Tensor first_out = outs.at(0).isTensor() ? outs[0].toTensor() : outs[0].toTensorList().get(0);
    if (fa.name() == "dtype") inner.push_back(static_cast<int64_t>(first_out.scalar_type()));
    else if (fa.name() == "device") inner.push_back(first_out.device());
    else inner.push_back(fa.default_value().value_or(c10::IValue()));
  }
  functional_op.callBoxed(&inner);
  std::vector<at::Tensor> results;
  for (const auto& r : inner) {
    if (r.isTensor()) results.push_back(r.toTensor());
    else for (const at::Tensor& t : r.toTensorList()) results.push_back(t);
  }
  std::vector<at::Tensor> out_tensors;
  for (const auto& o : outs) {
    if (o.isTensor()) out_tensors.push_back(o.toTensor());
    else for (const at::Tensor& t : o.toTensorList()) out_tensors.push_back(t);
  }
  TORCH_CHECK(out_tensors.size() == results.size(), op.schema().name(), ": expected ", results.size(),
              " out= tensors, got ", out_tensors.size());
  for (size_t i = 0; i < results.size(); ++i) {
    at::Tensor& out = out_tensors[i];
    TORCH_CHECK(at::canCast(results[i].scalar_type(), out.scalar_type()), "result type ",
                results[i].scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
    at::native::resize_output(out, results[i].sizes());
    out.copy_(results[i]);
  }
  torch::jit::drop(*stack, n);
  for (auto& o : outs) stack->push_back(std::move(o));
}

}  // namespace tt::backend
