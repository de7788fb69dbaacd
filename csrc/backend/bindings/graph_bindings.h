// Python bindings of the whole-graph path (torch_tpu.compiler builds the
// graph description from an FX graph).
#pragma once

#include <pybind11/pybind11.h>

namespace tt::backend {
void bind_graph_executable(pybind11::module_& m);
}
