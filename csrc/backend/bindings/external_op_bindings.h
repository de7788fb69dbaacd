// Python bindings of external-module operators (lowering/external_op.h):
// torch_tpu._internal.pallas registers each jax_op and its custom kernels'
// call op here, with a Python provider of their StableHLO.
#pragma once

#include <pybind11/pybind11.h>

namespace tt::backend {
void bind_external_ops(pybind11::module_& m);
}
