#include "backend/pipeline/op_registration.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>

#include "backend/pipeline/executor.h"
#include "lowering/external_op.h"

namespace tt::backend {
namespace {

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// A factory's TensorOptions arguments; an out= form takes them from `out`.
bool is_factory_option(const c10::Argument& a) {
  return a.kwarg_only() && (a.name() == "dtype" || a.name() == "layout" || a.name() == "device" ||
                            a.name() == "pin_memory");
}

// Same argument names and types, ignoring out= arguments, alias annotations
// (add_.Tensor's `Tensor(a!) self` matches add.Tensor's `self`) and the
// functional form's TensorOptions (eye.m_out matches eye.m).
bool same_inputs(const c10::FunctionSchema& functional, const c10::FunctionSchema& b) {
  std::vector<const c10::Argument*> xa, xb;
  auto in_b = [&](const c10::Argument& x) {
    for (const auto& y : b.arguments()) if (y.name() == x.name()) return true;
    return false;
  };
  for (const auto& x : functional.arguments())
    if (!x.is_out() && !(is_factory_option(x) && !in_b(x))) xa.push_back(&x);
  for (const auto& x : b.arguments()) if (!x.is_out()) xb.push_back(&x);
  if (xa.size() != xb.size()) return false;
  for (size_t i = 0; i < xa.size(); ++i)
    if (xa[i]->name() != xb[i]->name() || xa[i]->type()->str() != xb[i]->type()->str()) return false;
  return true;
}

struct NativeKernel final : c10::OperatorKernel {
  explicit NativeKernel(OpPlan p) : plan(std::move(p)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    execute(plan, op, stack);
  }
  OpPlan plan;
};

struct OutKernel final : c10::OperatorKernel {
  explicit OutKernel(c10::OperatorHandle f) : functional(std::move(f)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    execute_out(functional, op, stack);
  }
  c10::OperatorHandle functional;
};

std::mutex g_mu;
bool g_done = false;
std::vector<std::string> g_registered;
std::vector<std::unique_ptr<torch::Library>> g_libs;

// Rules for operators outside aten ("torchvision::roi_align"): their library
// may load after torch_tpu, so the kernel is registered by name now and the
// dispatcher binds it when the library defines the schema. Such a rule names
// a functional overload; its library registers its own autograd kernels.
void register_other_namespaces() {
  std::map<std::string, torch::Library*> by_namespace;
  for (const auto& name : lowering::rule_names(false)) {
    auto sep = name.find("::");
    if (sep == std::string::npos || name.rfind("aten::", 0) == 0 || lowering::is_external_op(name)) continue;
    const std::string ns = name.substr(0, sep);
    torch::Library*& lib = by_namespace[ns];
    if (!lib) {
      g_libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1,
                                                       __FILE__, __LINE__));
      lib = g_libs.back().get();
    }
    lib->impl(name.substr(sep + 2).c_str(),
              torch::CppFunction::makeFromBoxedFunctor(
                  std::make_unique<NativeKernel>(make_plan(name, lowering::find_rule(name), Mode::Functional))));
    g_registered.push_back(name + " (functional)");
  }
}

}  // namespace

void register_lowered_ops() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_done) return;
  g_done = true;
  auto& d = c10::Dispatcher::singleton();

  // Functional overloads with a rule, grouped by base name.
  std::map<std::string, std::vector<c10::OperatorHandle>> functional_by_base;
  std::vector<c10::OperatorHandle> all;
  for (const auto& name : d.getAllOpNames()) {
    auto op = d.findOp(name);
    // An operator with kernels but no schema yet (a library's, registered
    // by name before it loads) has nothing to derive.
    if (!op || !op->hasSchema()) continue;
    all.push_back(*op);
    const lowering::Rule* r = lowering::find_rule(full_name(name));
    if (r && !r->graph_only) functional_by_base[name.name].push_back(*op);
  }

  auto find_functional = [&](const std::string& base, const c10::FunctionSchema& schema)
      -> std::optional<c10::OperatorHandle> {
    for (const std::string& b : {base, base + "_functional"}) {
      auto it = functional_by_base.find(b);
      if (it == functional_by_base.end()) continue;
      for (const auto& f : it->second)
        if (!f.schema().is_mutable() && same_inputs(f.schema(), schema)) return f;
    }
    return std::nullopt;
  };

  g_libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                   c10::DispatchKey::PrivateUse1, __FILE__, __LINE__));
  torch::Library* lib = g_libs.back().get();
  for (const auto& op : all) {
    const auto& schema = op.schema();
    const std::string name = full_name(schema.operator_name());
    if (name.rfind("aten::", 0) != 0) continue;
    if (op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;  // ours, explicit
    if (op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) continue;

    const std::string& base = schema.name();
    bool has_out = false;
    for (const auto& a : schema.arguments()) has_out |= a.is_out();
    bool inplace = base.size() > 1 && base.back() == '_' && !schema.arguments().empty() &&
                   schema.arguments()[0].alias_info() && schema.arguments()[0].alias_info()->isWrite();

    std::string reg_name = name.substr(6);  // without "aten::"
    const lowering::Rule* rule = lowering::find_rule(name);
    if (rule && rule->graph_only) continue;
    if (rule && !schema.is_mutable()) {
      lib->impl(reg_name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                      std::make_unique<NativeKernel>(make_plan(name, rule, Mode::Functional))));
      g_registered.push_back(name + " (functional)");
    } else if (inplace && !has_out) {
      auto f = find_functional(base.substr(0, base.size() - 1), schema);
      if (!f) continue;
      std::string fname = full_name(f->schema().operator_name());
      lib->impl(reg_name.c_str(),
                torch::CppFunction::makeFromBoxedFunctor(std::make_unique<NativeKernel>(
                    make_plan(fname, lowering::find_rule(fname), Mode::Inplace, *f))));
      g_registered.push_back(name + " -> " + fname + " (in-place)");
    } else if (has_out) {
      auto f = find_functional(base, schema);
      if (!f) continue;
      lib->impl(reg_name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OutKernel>(*f)));
      g_registered.push_back(name + " -> " + full_name(f->schema().operator_name()) + " (out=)");
    }
  }

  register_other_namespaces();
}

std::vector<std::string> registered_ops() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_registered;
}

}  // namespace tt::backend
