#include "backend/pipeline/eager_decomposition.h"

#include <pybind11/pybind11.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

#include <mutex>
#include <unordered_set>

namespace py = pybind11;

namespace tt::backend {
namespace {

std::mutex g_mu;
// torch_tpu._eager_decompositions.handle, set at import; owned for the life
// of the process (never released: the interpreter may be gone at exit).
py::object* g_handler = nullptr;
// Ops with no decomposition at all: never offered to Python again.
std::unordered_set<std::string> g_without_decomposition;

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// A Python exception from the handler as the c10 error of the same Python
// type, so that it keeps its type through the dispatcher and across the
// autograd engine's threads.
[[noreturn]] void rethrow_as_c10(py::error_already_set& e) {
  std::string msg = py::str(e.value());
  if (e.matches(PyExc_NotImplementedError)) TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
  if (e.matches(PyExc_IndexError)) TORCH_CHECK_INDEX(false, msg);
  if (e.matches(PyExc_ValueError)) TORCH_CHECK_VALUE(false, msg);
  if (e.matches(PyExc_TypeError)) TORCH_CHECK_TYPE(false, msg);
  TORCH_CHECK(false, msg);
}

// An argument as Python sees it: a dtype, layout or memory format (an int
// in a boxed stack) becomes torch.dtype, torch.layout, torch.memory_format.
py::object to_python(const c10::Argument& arg, const c10::IValue& v) {
  if (v.isInt()) {
    c10::TypePtr t = arg.real_type();
    if (auto opt = t->castRaw<c10::OptionalType>()) t = opt->getElementType();
    switch (t->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
      case c10::TypeKind::LayoutType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<c10::Layout>(v.toInt()))));
      case c10::TypeKind::MemoryFormatType:
        return py::reinterpret_borrow<py::object>(
            torch::utils::getTHPMemoryFormat(static_cast<c10::MemoryFormat>(v.toInt())));
      default: break;
    }
  }
  return torch::jit::toPyObject(v);
}

}  // namespace

void set_eager_decomposition_handler(py::object handler) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_handler = new py::object(std::move(handler));
  g_without_decomposition.clear();
}

bool try_eager_decomposition(const c10::OperatorHandle& op, torch::jit::Stack* stack, std::string* reason) {
  const std::string name = op_name(op);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_handler || g_without_decomposition.count(name)) return false;
  }
  if (!Py_IsInitialized()) return false;
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  py::gil_scoped_acquire gil;
  py::object result;
  try {
    py::list args;
    for (size_t i = 0; i < n; ++i) args.append(to_python(schema.arguments()[i], (*stack)[stack->size() - n + i]));
    // handle(name, args) -> (True, result) or (False, reason, for_every_call)
    py::tuple r = (*g_handler)(name, args);
    if (!r[0].cast<bool>()) {
      *reason = r[1].cast<std::string>();
      if (r[2].cast<bool>()) {
        std::lock_guard<std::mutex> lock(g_mu);
        g_without_decomposition.insert(name);
      }
      return false;
    }
    result = r[1];
  } catch (py::error_already_set& e) {
    rethrow_as_c10(e);
  }
  const auto& returns = schema.returns();
  std::vector<c10::IValue> values;
  try {
    if (returns.size() == 1) {
      values.push_back(torch::jit::toIValue(result, returns[0].type()));
    } else {
      py::tuple t = result.cast<py::tuple>();
      TORCH_CHECK(t.size() == returns.size(), "tpu: the decomposition of ", name, " returned ", t.size(),
                  " values, its schema ", returns.size());
      for (size_t i = 0; i < returns.size(); ++i) values.push_back(torch::jit::toIValue(t[i], returns[i].type()));
    }
  } catch (py::error_already_set& e) {
    rethrow_as_c10(e);
  } catch (py::cast_error& e) {
    TORCH_CHECK(false, "tpu: the decomposition of ", name, " returned a value its schema does not take: ", e.what());
  }
  torch::jit::drop(*stack, n);
  for (auto& v : values) stack->push_back(std::move(v));
  return true;
}

}  // namespace tt::backend
