// The graph description torch_tpu/compiler/graph_spec.py builds:
//   inputs:  [(torch.dtype, [sizes])]
//   nodes:   [(op_name, [arg], [(torch.dtype, [sizes]) or None], [value ids])]
//   outputs: [value ids]
//   updates: [(input, output)]: output is the new value of input (mutated)
// An arg, in schema order, is ("T", id) a tensor value, ("L", [id or -1]) a
// list of them, or ("V", python value) any other argument, which is
// converted for the op's schema slot and classified by classify_host_arg,
// as an eager call's argument is.
#include "backend/bindings/graph_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/jit/python/pybind_utils.h>

#include "backend/pipeline/call_record.h"
#include "backend/device/device_storage.h"
#include "backend/pipeline/graph_executable.h"

namespace py = pybind11;

namespace tt::backend {
namespace {

using lowering::Arg;
using Kind = lowering::Arg::Kind;

hlo::DType dtype_of(const py::handle& h) {
  TORCH_CHECK_TYPE(THPDtype_Check(h.ptr()), "tpu graph: expected a torch.dtype, got ", py::str(h).cast<std::string>());
  return hlo_dtype(reinterpret_cast<THPDtype*>(h.ptr())->scalar_type);
}

hlo::Type type_of(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  return hlo::Type{dtype_of(t[0]), t[1].cast<std::vector<int64_t>>()};
}

// The schema of a node's op, for classifying its host arguments.
const c10::FunctionSchema& schema_of(const std::string& op) {
  auto dot = op.find('.');
  std::string name = op.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!handle) throw lowering::LoweringError("tpu graph: no schema for " + op);
  return handle->schema();
}

lowering::GraphArg arg_of(const py::handle& h, const c10::Argument& schema_arg, const std::string& op) {
  auto t = h.cast<py::tuple>();
  char k = t[0].cast<std::string>().at(0);
  lowering::GraphArg g;
  if (k == 'T') {
    g.kind = Kind::Tensor;
    g.value = t[1].cast<int>();
    return g;
  }
  if (k == 'L') {
    g.kind = Kind::TensorList;
    g.values = t[1].cast<std::vector<int>>();
    return g;
  }
  TORCH_CHECK(k == 'V', "tpu graph: unknown argument kind '", k, "'");
  py::handle v = t[1];
  // A Python number where the schema has a Tensor: a constant that promotes
  // like a wrapped number, classified as the Scalar it is.
  bool number_for_tensor = is_tensor_schema_type(schema_arg.type()) &&
                           (py::isinstance<py::bool_>(v) || py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) ||
                            PyComplex_Check(v.ptr()));
  c10::IValue iv;
  try {
    iv = number_for_tensor ? torch::jit::toIValue(v, c10::NumberType::get()) : torch::jit::toIValue(v, schema_arg.type());
  } catch (const std::exception& e) {
    throw lowering::LoweringError("tpu graph: " + op + " argument " + schema_arg.name() + ": " + e.what());
  }
  if (!classify_host_arg(iv, number_for_tensor || is_scalar_schema_type(schema_arg.type()), g))
    throw lowering::LoweringError("tpu graph: " + op + " argument " + schema_arg.name() + " is a tensor constant");
  if (number_for_tensor) {
    g.kind = Kind::Tensor;
    g.number = true;
  }
  return g;
}

lowering::Graph graph_of(const py::list& inputs, const py::list& nodes, const py::list& outputs,
                         const py::list& updates) {
  lowering::Graph g;
  for (const auto& i : inputs) g.inputs.push_back(type_of(i));
  for (const auto& h : nodes) {
    auto t = h.cast<py::tuple>();
    lowering::GraphNode n;
    n.op = t[0].cast<std::string>();
    const c10::FunctionSchema& schema = schema_of(n.op);
    auto args = t[1].cast<py::list>();
    if (args.size() != schema.arguments().size())
      throw lowering::LoweringError("tpu graph: " + n.op + " takes " + std::to_string(schema.arguments().size()) +
                                    " arguments, the graph gives " + std::to_string(args.size()));
    for (size_t i = 0; i < args.size(); ++i) n.args.push_back(arg_of(args[i], schema.arguments()[i], n.op));
    for (const auto& o : t[2].cast<py::list>())
      n.out_types.push_back(o.is_none() ? hlo::Type{hlo::DType::Pred, {}} : type_of(o));
    n.out_values = t[3].cast<std::vector<int>>();
    g.nodes.push_back(std::move(n));
  }
  g.outputs = outputs.cast<std::vector<int>>();
  g.updates = updates.cast<std::vector<std::pair<int, int>>>();
  return g;
}

}  // namespace

void bind_graph_executable(py::module_& m) {
  // LoweringError reaches Python as torch_tpu._C.LoweringError, so that the
  // compiler can run a graph it cannot lower eagerly instead.
  static py::exception<lowering::LoweringError> lowering_error(m, "LoweringError", PyExc_NotImplementedError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lowering::LoweringError& e) {
      PyErr_SetString(lowering_error.ptr(), e.what());
    }
  });
  py::class_<GraphExecutable, std::shared_ptr<GraphExecutable>>(m, "_GraphExecutable")
      .def(py::init([](const std::string& name, const py::list& inputs, const py::list& nodes,
                       const py::list& outputs, const py::list& updates, const py::object& replicas) {
             lowering::Graph g = graph_of(inputs, nodes, outputs, updates);
             std::vector<int> devices;
             if (!replicas.is_none()) {
               // (devices, {c10d group name: replica groups}): one replica per device.
               auto t = replicas.cast<py::tuple>();
               devices = t[0].cast<std::vector<int>>();
               g.replicas.num_replicas = static_cast<int>(devices.size());
               g.replicas.groups = t[1].cast<std::map<std::string, std::vector<std::vector<int64_t>>>>();
               py::gil_scoped_release no_gil;
               return std::make_shared<GraphExecutable>(g, name, devices);
             }
             py::gil_scoped_release no_gil;
             return std::make_shared<GraphExecutable>(g, name);
           }),
           py::arg("name"), py::arg("inputs"), py::arg("nodes"), py::arg("outputs"), py::arg("updates") = py::list(),
           py::arg("replicas") = py::none())
      .def("__call__", &GraphExecutable::run)
      .def("run_replicated", &GraphExecutable::run_replicated, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("module_text", &GraphExecutable::module_text)
      .def_property_readonly("compile_seconds", &GraphExecutable::compile_seconds)
      .def_property_readonly("num_inputs", &GraphExecutable::num_inputs);
}

}  // namespace tt::backend
