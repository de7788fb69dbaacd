// torch_tpu._C's bindings for the tpu_dist backend (torch_tpu/distributed).
#pragma once

#include <pybind11/pybind11.h>

namespace tt::backend::dist {

void bind_dist(pybind11::module& m);

}  // namespace tt::backend::dist
