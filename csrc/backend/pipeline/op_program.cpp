#include "backend/pipeline/op_program.h"

#include <ATen/ATen.h>

#include "backend/device/storage_contents.h"
#include "lowering/device_check.h"
#include "lowering/helpers.h"
#include "lowering/rule_call.h"
#include "lowering/view.h"

namespace tt::backend {

using lowering::Arg;
using Kind = lowering::Arg::Kind;

namespace {

// ---- result types from PyTorch's meta kernels ------------------------------------

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined()) return t;
  // CPU 0-d values stay on the CPU: meta kernels accept CPU scalars, and
  // Python meta kernels read wrapped numbers' values.
  if (t.device().is_cpu()) return t;
  int64_t storage_numel = static_cast<int64_t>(storage_of(t)->nbytes / t.element_size());
  at::Tensor base = at::empty({storage_numel}, t.options().device(at::kMeta));
  return base.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> ts;
    for (const auto& t : v.toTensorList()) ts.push_back(to_meta(t));
    return ts;
  }
  if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
    c10::List<std::optional<at::Tensor>> l;
    for (const auto& e : v.toListRef())
      l.push_back(e.isNone() ? std::optional<at::Tensor>() : std::optional<at::Tensor>(to_meta(e.toTensor())));
    return l;
  }
  if (v.isDevice()) return c10::Device(at::kMeta);
  if (v.isGenerator()) return c10::IValue();
  return v;
}

// Calls whose PyTorch meta kernel fails on arguments the op accepts, or
// rejects them with another exception than the CPU kernel; for these the
// rule derives the result types and checks the arguments itself.
bool meta_kernel_fails(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  // torch/_meta_registrations.py's linalg_eig (and _linalg_eigvals) raises
  // KeyError for an integer input and AssertionError for a 1-d one, and
  // makes complex32 results for float16; the CPU raises RuntimeError and
  // NotImplementedError.
  const std::string& name = op.schema().name();
  if ((name == "aten::linalg_eig" || name == "aten::_linalg_eigvals") && !args.empty() && args[0].isTensor()) {
    const at::Tensor& t = args[0].toTensor();
    return t.dim() < 2 || t.scalar_type() == at::kHalf ||
           !(at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()));
  }
  // torch/_meta_registrations.py's _thnn_fused_lstm_cell reads the device of
  // an absent bias (nn.LSTM(bias=False)).
  auto absent = [](const c10::IValue& v) { return v.isNone() || (v.isTensor() && !v.toTensor().defined()); };
  if (op.schema().name() == "aten::_thnn_fused_lstm_cell")
    return args.size() > 4 && (absent(args[3]) || absent(args[4]));
  // torch/_meta_registrations.py's _grouped_mm accepts bfloat16 only; the CPU
  // kernel also multiplies float32 and float16 (transformers' MoE calls it so
  // on tpu). The rule checks those calls as the CPU does.
  if (name == "aten::_grouped_mm" && !args.empty() && args[0].isTensor())
    return args[0].toTensor().scalar_type() != at::kBFloat16;
  return false;
}

// Runs `op` on meta tensors shaped like the arguments. PyTorch's own checks
// run here, so a bad call raises exactly the error it raises on the CPU.
// Returns false when the op has no (usable) meta kernel.
bool infer_types(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                 std::vector<hlo::Type>& types, std::vector<int>& list_sizes) {
  if (meta_kernel_fails(op, args)) return false;
  torch::jit::Stack meta;
  for (const auto& v : args) meta.push_back(to_meta(v));
  try {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.callBoxed(&meta);
  } catch (const c10::NotImplementedError&) {
    // No meta kernel (or a composite one that refuses meta tensors, as
    // convolution_overrideable does): the rule derives its result types.
    return false;
  }
  types.clear();
  list_sizes.clear();
  for (const auto& r : meta) {
    if (r.isNone() || (r.isTensor() && !r.toTensor().defined())) {
      // A backward op's output that output_mask switched off.
      types.push_back(hlo::Type{hlo::DType::Pred, {}});
      list_sizes.push_back(kMaskedOutput);
    } else if (r.isTensor()) {
      const at::Tensor& t = r.toTensor();
      types.push_back(hlo::Type{hlo_dtype(t.scalar_type()), t.sizes().vec()});
      list_sizes.push_back(-1);
    } else if (r.isTensorList()) {
      auto l = r.toTensorList();
      for (const at::Tensor& t : l) types.push_back(hlo::Type{hlo_dtype(t.scalar_type()), t.sizes().vec()});
      list_sizes.push_back(static_cast<int>(l.size()));
    } else {
      TORCH_CHECK(false, "tpu executor: ", op.schema().name(), " returns a non-tensor value");
    }
  }
  return true;
}

// ---- program building ---------------------------------------------------------------


Arg build_arg(hlo::Builder& b, const ArgRecord& r, const ProgramInputs& in) {
  Arg a(r);
  if (r.kind == Kind::Tensor) {
    if (r.storage >= 0) {
      a.tensor = lowering::read_tensor(b, in.storages[r.storage], r.dtype, r.view);
      a.contiguous = r.view.numel() == 0 || r.view.contiguous();
    } else {
      a.tensor = in.scalars[r.scalar];
    }
  } else if (r.kind == Kind::Scalar) {
    a.tensor = in.scalars[r.scalar];
  } else if (r.kind == Kind::TensorList) {
    for (const auto& e : r.elems) a.tensors.push_back(e.kind == Kind::Tensor ? build_arg(b, e, in).tensor : hlo::Value{});
  }
  return a;
}

// The rule's results, checked against PyTorch's types, masked outputs
// dropped; for an in-place call, the storage with the result written in.
// When the types are not known, `derived_list_sizes` receives the shape of
// the returns as the rule produced them.
hlo::Values emit_impl(hlo::Builder& b, const ProgramInputs& in, const OpPlan& plan, const OpMeta& meta,
                      const std::vector<ArgRecord>& records, std::vector<int>* derived_list_sizes,
                      std::vector<lowering::DeviceCheck>* checks,
                      std::vector<std::pair<int, int>>* donations = nullptr) {
  lowering::Context ctx;
  ctx.donations = donations;
  ctx.op = plan.functional;
  ctx.out_types = meta.rule_types;
  ctx.checks = checks;
  ctx.rng_seed = in.seed;
  ctx.rng_offset = in.offset;
  lowering::Args largs;
  for (const auto& r : records) largs.push_back(build_arg(b, r, in));

  std::vector<bool> masked;
  if (plan.mode == Mode::Inplace) {
    // Only the first result is written back; the rest go unused.
    masked.assign(ctx.out_types.size(), true);
    if (!masked.empty()) masked[0] = false;
  } else if (meta.types_known) {
    for (int list_size : meta.list_sizes)
      masked.insert(masked.end(), list_size < 0 ? 1 : static_cast<size_t>(list_size), list_size == kMaskedOutput);
  }
  hlo::Values all = lowering::call_rule(b, *plan.rule, largs, ctx, masked, meta.types_known);
  // A masked output has no value; without known types the rule's own
  // results say which outputs exist.
  hlo::Values results;
  for (const auto& r : all) {
    if (!meta.types_known && derived_list_sizes) derived_list_sizes->push_back(r.valid() ? -1 : kMaskedOutput);
    if (r.valid()) results.push_back(r);
  }
  if (plan.mode != Mode::Inplace) return results;

  const ArgRecord& self = records.at(0);
  TORCH_CHECK(self.kind == Kind::Tensor && self.storage >= 0, plan.functional,
              ": in-place target is not a tpu tensor");
  return {lowering::write_tensor(b, in.storages[self.storage], self.dtype, self.view, results.at(0))};
}

}  // namespace

ProgramInputs declare_inputs(hlo::Builder& b, const CallState& st, bool needs_rng) {
  ProgramInputs in;
  for (const auto& s : st.storages) in.storages.push_back(b.param(s.type));
  for (const auto& s : st.scalars) in.scalars.push_back(b.param(hlo::Type{hlo_dtype(s.type), {}}));
  if (needs_rng) {
    in.seed = b.param(hlo::Type{hlo::DType::U64, {}});
    in.offset = b.param(hlo::Type{hlo::DType::U64, {}});
  }
  return in;
}

std::shared_ptr<OpMeta> lower_op(hlo::Builder& b, const ProgramInputs& in, const OpPlan& plan,
                                 const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                 const CallState& st, hlo::Values* results) {
  auto meta = std::make_shared<OpMeta>();
  if (plan.mode == Mode::Inplace) {
    std::vector<hlo::Type> inplace_types;
    std::vector<int> ignored;
    infer_types(op, args, inplace_types, ignored);  // PyTorch's in-place checks
    meta->types_known = infer_types(*plan.functional_op, args, meta->rule_types, meta->list_sizes);
    meta->list_sizes = {-1};  // only the first result is written back
  } else {
    meta->types_known = infer_types(op, args, meta->rule_types, meta->list_sizes);
  }
  std::vector<int> derived;
  std::vector<lowering::DeviceCheck> checks;
  *results = emit_impl(b, in, plan, *meta, st.records, &derived,
                       lowering::device_checks_enabled() ? &checks : nullptr,
                       plan.mode == Mode::Functional ? &meta->donations : nullptr);
  if (!meta->types_known) meta->list_sizes = derived;
  if (plan.mode == Mode::Inplace) {
    meta->list_sizes = {-1};
    meta->rng_counters = lowering::numel(st.records.at(0).view.sizes);
  } else {
    for (const auto& r : *results) {
      meta->outputs.push_back({r.dtype(), r.shape()});
      meta->rng_counters += r.type.numel();
    }
  }
  meta->needs_rng = plan.rule->needs_rng;
  meta->producer = plan.functional + "(" + describe_args(st) + ")";
  if (!checks.empty()) {
    auto infos = std::make_shared<std::vector<lowering::CheckInfo>>();
    for (auto& k : checks) {
      k.info.message = plan.functional + ": " + k.info.message;
      infos->push_back(k.info);
    }
    meta->checks = std::move(infos);
    results->push_back(lowering::pack_checks(b, checks));
  }
  return meta;
}

void push_results(torch::jit::Stack* stack, const OpMeta& meta, const std::function<at::Tensor(size_t)>& result) {
  size_t k = 0;
  for (int list_size : meta.list_sizes) {
    if (list_size == kMaskedOutput) {
      stack->push_back(at::Tensor());
    } else if (list_size < 0) {
      stack->push_back(result(k++));
    } else {
      std::vector<at::Tensor> l;
      for (int j = 0; j < list_size; ++j) l.push_back(result(k++));
      stack->push_back(std::move(l));
    }
  }
}

}  // namespace tt::backend
