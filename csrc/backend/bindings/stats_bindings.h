// torch_tpu._C._stats(section): the one place Python reads the counters the
// C++ layers keep (torch_tpu.stats() and the older calls built on it).
#pragma once

#include <pybind11/pybind11.h>

namespace tt::backend {
void bind_stats(pybind11::module_& m);
}
