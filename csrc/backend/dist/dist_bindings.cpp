#include "backend/dist/dist_bindings.h"

#include <torch/csrc/utils/pybind.h>

#include "backend/dist/tpu_dist_backend.h"

namespace py = pybind11;

namespace tt::backend::dist {

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
}

}  // namespace tt::backend::dist
