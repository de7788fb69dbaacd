#include "backend/bindings/distributed_bindings.h"

#include <torch/csrc/utils/pybind.h>

#include "backend/distributed/pjrt_store.h"
#include "backend/distributed/spmd_collectives.h"
#include "backend/distributed/tpu_dist_backend.h"

namespace py = pybind11;

namespace tt::backend::dist {
namespace {

// Runs `f`, raising c10's ValueError / TypeError as Python's.
template <typename F>
auto with_python_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::ValueError& e) {
    throw py::value_error(e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    throw py::type_error(e.what_without_backtrace());
  }
}

}  // namespace

void bind_dist(py::module& m) {
  // A c10d Backend subclass: torch's pybind class for c10d::Backend is its
  // base, so c10d's Python code can register it on a ProcessGroup.
  py::class_<TpuDistBackend, c10d::Backend, c10::intrusive_ptr<TpuDistBackend>>(m, "_TpuDistBackend")
      .def(py::init([](c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Store> status, int rank,
                       int size, double timeout_s, std::string group) {
             auto ms = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
             return c10::make_intrusive<TpuDistBackend>(std::move(gloo), std::move(status), rank, size, ms,
                                                        std::move(group));
           }),
           py::arg("gloo"), py::arg("status"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
           py::arg("group"));
  m.def("_tpu_dist_check_enabled", &agreement_check_enabled);
  bind_pjrt_store(m);

  // torch_tpu.distributed.spmd: one XLA program of N replicas over N devices.
  auto spmd = [](std::string kind, std::string reduce_op, int64_t dim, int64_t concat_dim,
                 std::vector<std::pair<int64_t, int64_t>> pairs) {
    SpmdCollective c;
    c.kind = std::move(kind);
    c.reduce_op = std::move(reduce_op);
    c.dim = dim;
    c.concat_dim = concat_dim;
    c.pairs = std::move(pairs);
    return c;
  };
  m.def(
      "_spmd_collective",
      [spmd](const std::vector<at::Tensor>& tensors, std::string kind, std::string reduce_op, int64_t dim,
             int64_t concat_dim, std::vector<std::pair<int64_t, int64_t>> pairs) {
        SpmdCollective c = spmd(std::move(kind), std::move(reduce_op), dim, concat_dim, std::move(pairs));
        py::gil_scoped_release no_gil;
        return with_python_errors([&] { return spmd_run(c, tensors); });
      },
      py::arg("tensors"), py::arg("kind"), py::arg("reduce_op"), py::arg("dim"), py::arg("concat_dim"),
      py::arg("pairs"));
  m.def(
      "_spmd_program_text",
      [spmd](int64_t n, std::vector<int64_t> sizes, at::ScalarType dtype, std::string kind, std::string reduce_op,
             int64_t dim, int64_t concat_dim, std::vector<std::pair<int64_t, int64_t>> pairs) {
        SpmdCollective c = spmd(std::move(kind), std::move(reduce_op), dim, concat_dim, std::move(pairs));
        return with_python_errors([&] { return spmd_program_text(c, n, sizes, dtype); });
      },
      py::arg("n"), py::arg("sizes"), py::arg("dtype"), py::arg("kind"), py::arg("reduce_op"), py::arg("dim"),
      py::arg("concat_dim"), py::arg("pairs"));
}

}  // namespace tt::backend::dist
