// The graph description torch_tpu/compiler/graph_spec.py builds:
//   inputs:  [(torch.dtype, [sizes])]
//   nodes:   [(op_name, [arg], [(torch.dtype, [sizes]) or None], [value ids])]
//   outputs: [value ids]
// An arg is a tuple whose first item says its kind:
//   ("T", id) tensor value      ("W", number) a Python number in a Tensor slot
//   ("L", [id or -1])           ("S", number) Scalar
//   ("i", int) ("d", float) ("b", bool) ("I", [int]) ("D", [float])
//   ("B", [bool]) ("s", str) ("N",) None
#include "backend/graph_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/device_storage.h"
#include "backend/graph_executable.h"

namespace py = pybind11;

namespace tt::backend {
namespace {

using lowering::Arg;
using Kind = lowering::Arg::Kind;

hlo::DType dtype_of(const py::handle& h) {
  TORCH_CHECK_TYPE(THPDtype_Check(h.ptr()), "tpu graph: expected a torch.dtype, got ", py::str(h).cast<std::string>());
  return static_cast<hlo::DType>(to_element_type(reinterpret_cast<THPDtype*>(h.ptr())->scalar_type));
}

hlo::Type type_of(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  return hlo::Type{dtype_of(t[0]), t[1].cast<std::vector<int64_t>>()};
}

void number(const py::handle& v, lowering::GraphArg& g) {
  if (py::isinstance<py::bool_>(v)) {
    g.scalar_kind = hlo::DType::Pred;
    g.b = v.cast<bool>();
    g.i = g.b;
    g.d = g.b;
  } else if (py::isinstance<py::int_>(v)) {
    g.scalar_kind = hlo::DType::S64;
    g.i = v.cast<int64_t>();
    g.d = static_cast<double>(g.i);
  } else if (PyComplex_Check(v.ptr())) {
    g.scalar_kind = hlo::DType::C128;
    g.d = PyComplex_RealAsDouble(v.ptr());
    g.imag = PyComplex_ImagAsDouble(v.ptr());
    g.i = static_cast<int64_t>(g.d);
  } else {
    g.scalar_kind = hlo::DType::F64;
    g.d = v.cast<double>();
    g.i = static_cast<int64_t>(g.d);
  }
}

lowering::GraphArg arg_of(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  std::string k = t[0].cast<std::string>();
  lowering::GraphArg g;
  switch (k.at(0)) {
    case 'T': g.kind = Kind::Tensor; g.value = t[1].cast<int>(); break;
    case 'W': g.kind = Kind::Tensor; g.number = true; number(t[1], g); break;
    case 'L': g.kind = Kind::TensorList; g.values = t[1].cast<std::vector<int>>(); break;
    case 'S': g.kind = Kind::Scalar; number(t[1], g); break;
    case 'i': g.kind = Kind::Int; g.i = t[1].cast<int64_t>(); g.d = static_cast<double>(g.i); break;
    case 'd': g.kind = Kind::Double; g.d = t[1].cast<double>(); break;
    case 'b': g.kind = Kind::Bool; g.b = t[1].cast<bool>(); g.i = g.b; break;
    case 'I': g.kind = Kind::IntList; g.ints = t[1].cast<std::vector<int64_t>>(); break;
    case 'D': g.kind = Kind::DoubleList; g.doubles = t[1].cast<std::vector<double>>(); break;
    case 'B': g.kind = Kind::BoolList; g.bools = t[1].cast<std::vector<bool>>(); break;
    case 's': g.kind = Kind::String; g.s = t[1].cast<std::string>(); break;
    case 'N': g.kind = Kind::None; break;
    default: TORCH_CHECK(false, "tpu graph: unknown argument kind '", k, "'");
  }
  return g;
}

lowering::Graph graph_of(const py::list& inputs, const py::list& nodes, const py::list& outputs) {
  lowering::Graph g;
  for (const auto& i : inputs) g.inputs.push_back(type_of(i));
  for (const auto& h : nodes) {
    auto t = h.cast<py::tuple>();
    lowering::GraphNode n;
    n.op = t[0].cast<std::string>();
    for (const auto& a : t[1].cast<py::list>()) n.args.push_back(arg_of(a));
    for (const auto& o : t[2].cast<py::list>())
      n.out_types.push_back(o.is_none() ? hlo::Type{hlo::DType::Pred, {}} : type_of(o));
    n.out_values = t[3].cast<std::vector<int>>();
    g.nodes.push_back(std::move(n));
  }
  g.outputs = outputs.cast<std::vector<int>>();
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
                       const py::list& outputs) {
             lowering::Graph g = graph_of(inputs, nodes, outputs);
             py::gil_scoped_release no_gil;
             return std::make_shared<GraphExecutable>(g, name);
           }),
           py::arg("name"), py::arg("inputs"), py::arg("nodes"), py::arg("outputs"))
      .def("__call__", &GraphExecutable::run)
      .def_property_readonly("module_text", &GraphExecutable::module_text)
      .def_property_readonly("compile_seconds", &GraphExecutable::compile_seconds)
      .def_property_readonly("num_inputs", &GraphExecutable::num_inputs);
}

}  // namespace tt::backend
