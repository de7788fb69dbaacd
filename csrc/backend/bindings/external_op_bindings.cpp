// _register_external_op(name, provider): `name` ("ns::op") must already be a
// dispatcher operator (torch.library defined it). Its lowering rule becomes
// the provider's module, and the executor becomes its tpu kernel, as for an
// ATen op with a rule: strict eager runs it as a one-call program (cached by
// the call's key), fused eager records it into the cluster, and
// torch.compile graphs lower it as a node.
//
// The provider is called with the GIL held as
//   provider([(dtype, [sizes]) per tensor operand], [host argument values])
// with dtypes as MLIR element type names ("f32", "bf16", "i64", "ui8", "i1")
// and returns
//   (symbol, functions_text, [(dtype, [sizes]) inputs], [(dtype, [sizes])
//   results], [(operand, result) donations]).
// An exception it raises becomes a RuntimeError naming the op.
#include "backend/bindings/external_op_bindings.h"

#include <pybind11/stl.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <set>

#include "backend/pipeline/executor.h"
#include "backend/pipeline/op_plan.h"
#include "lowering/external_op.h"

namespace py = pybind11;

namespace tt::backend {
namespace {

using lowering::HostArg;
using Kind = lowering::HostArg::Kind;

hlo::DType parse_dtype(const std::string& name) {
  for (int i = 1; i <= static_cast<int>(hlo::DType::F8E4M3FN); ++i)
    if (name == hlo::mlir_name(static_cast<hlo::DType>(i))) return static_cast<hlo::DType>(i);
  throw std::runtime_error("unsupported element type " + name);
}

py::list types_to_py(const std::vector<hlo::Type>& ts) {
  py::list l;
  for (const auto& t : ts) l.append(py::make_tuple(hlo::mlir_name(t.dtype), t.shape));
  return l;
}

std::vector<hlo::Type> types_from_py(const py::handle& h) {
  std::vector<hlo::Type> ts;
  for (const auto& e : h.cast<py::list>()) {
    auto t = e.cast<py::tuple>();
    ts.push_back(hlo::Type{parse_dtype(t[0].cast<std::string>()), t[1].cast<std::vector<int64_t>>()});
  }
  return ts;
}

py::object host_to_py(const HostArg& h) {
  switch (h.kind) {
    case Kind::Int: return py::int_(h.i);
    case Kind::Double: return py::float_(h.d);
    case Kind::Bool: return py::bool_(h.b);
    case Kind::String: return py::str(h.s);
    case Kind::IntList: return py::cast(h.ints);
    case Kind::DoubleList: return py::cast(h.doubles);
    case Kind::BoolList: return py::cast(std::vector<bool>(h.bools.begin(), h.bools.end()));
    default: return py::none();
  }
}

struct ExternalKernel final : c10::OperatorKernel {
  explicit ExternalKernel(OpPlan p) : plan(std::move(p)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    execute(plan, op, stack);
  }
  OpPlan plan;
};

std::mutex g_mu;
std::set<std::string> g_with_kernel;
std::vector<std::unique_ptr<torch::Library>> g_libs;

void register_external(const std::string& name, py::function provider) {
  auto dot = name.find('.');
  std::string base = name.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchema({base, overload});
  TORCH_CHECK(handle, "_register_external_op: ", name, " is not a registered operator");
  TORCH_CHECK(!handle->schema().is_mutable(), "_register_external_op: ", name, " mutates its arguments");

  // Never freed: the rule may run after the interpreter is gone.
  auto* fn = new py::function(std::move(provider));
  lowering::register_external_op(name, [fn](const std::vector<hlo::Type>& tensors,
                                            const std::vector<HostArg>& host) {
    py::gil_scoped_acquire gil;
    lowering::ExternalModule m;
    try {
      py::list hl;
      for (const auto& h : host) hl.append(host_to_py(h));
      py::tuple r = (*fn)(types_to_py(tensors), hl).cast<py::tuple>();
      m.symbol = r[0].cast<std::string>();
      m.functions = r[1].cast<std::string>();
      m.inputs = types_from_py(r[2]);
      m.results = types_from_py(r[3]);
      m.donations = r[4].cast<std::vector<std::pair<int, int>>>();
    } catch (py::error_already_set& e) {
      std::string what = e.what();
      e.restore();
      PyErr_Clear();
      throw std::runtime_error(what);
    }
    return m;
  });

  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_with_kernel.insert(name).second) return;
  auto ns_end = base.find("::");
  TORCH_CHECK(ns_end != std::string::npos, "_register_external_op: ", name, " has no namespace");
  std::string ns = base.substr(0, ns_end);
  std::string reg_name = name.substr(ns_end + 2);
  g_libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1,
                                                   __FILE__, __LINE__));
  g_libs.back()->impl(reg_name.c_str(),
                      torch::CppFunction::makeFromBoxedFunctor(std::make_unique<ExternalKernel>(
                          make_plan(name, lowering::find_rule(name), Mode::Functional))));
}

}  // namespace

void bind_external_ops(py::module_& m) {
  m.def("_register_external_op", &register_external, py::arg("name"), py::arg("provider"));
  m.def("_is_external_op", &lowering::is_external_op);
  m.def("_external_stats", [] {
    auto s = lowering::external_stats();
    py::dict d;
    d["lowered"] = s.lowered;
    d["reused"] = s.reused;
    return d;
  });
}

}  // namespace tt::backend
