#include "backend/pipeline/compile_settings.h"
#include "backend/pipeline/program_runner.h"

#include <atomic>
#include <stdexcept>
#include <string>

#include "runtime/runtime.h"

namespace tt::backend {
namespace {
std::atomic<int> g_matmul_precision{-1};
}

int matmul_precision_override() { return g_matmul_precision.load(); }

void set_matmul_precision_override(int precision) {
  if (precision < -1 || precision > 2)
    throw std::invalid_argument("tpu matmul precision " + std::to_string(precision) + " is not -1, 0, 1 or 2");
  g_matmul_precision = precision;
}

void bind_compile_settings(pybind11::module_& m) {
  m.def("_matmul_precision_override", &matmul_precision_override);
  m.def("_set_matmul_precision_override", &set_matmul_precision_override);
  m.def("_allow_excess_precision", [] { return runtime::CurrentCompileOverrides().allow_excess_precision; });
  m.def("_set_allow_excess_precision", &runtime::SetAllowExcessPrecision);
  m.def("_program_cache_entries", [] {
    pybind11::list out;
    for (const auto& e : program_cache_entries())
      out.append(pybind11::make_tuple(pybind11::bytes(e.key), program_mode_name(e.mode), e.reads));
    return out;
  });
  m.def("_xla_optimization_level", [] { return runtime::CurrentCompileOverrides().optimization_level; });
  m.def("_set_xla_optimization_level", [](int level) {
    try {
      runtime::SetOptimizationLevel(level);
    } catch (const runtime::Error& e) {
      throw std::invalid_argument(e.what());
    }
  });
}

}  // namespace tt::backend
