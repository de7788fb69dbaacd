// Python bindings of the attention lowerings' private switch
// (torch_tpu._sdpa_path uses it).
#pragma once

#include <pybind11/pybind11.h>

namespace tt::backend {
void bind_attention(pybind11::module_& m);
}
