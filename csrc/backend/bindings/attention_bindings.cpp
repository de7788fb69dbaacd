// _set_sdpa_path(path, block_keys): forces the dense, the blockwise or the
// kernel SDPA lowering ("auto", "dense", "blockwise", "kernel") and the key block size (0: the
// default), for programs built after the call; _set_grouped_mm_path(path)
// picks _grouped_mm's ("auto", "xla", "kernel"). Benchmarks and tests use
// them through torch_tpu._sdpa_path and torch_tpu._kernel_paths, which also
// drop the program cache. _set_kernel_loader: see below.
#include "backend/bindings/attention_bindings.h"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "lowering/ops/attention_common.h"
#include "lowering/ops/kernel_choice.h"

namespace tt::backend {

void bind_attention(pybind11::module_& m) {
  namespace attention = lowering::attention;
  m.def("_set_sdpa_path", [](const std::string& path, int64_t block_keys) {
    attention::Path p;
    if (path == "auto") p = attention::Path::Auto;
    else if (path == "dense") p = attention::Path::Dense;
    else if (path == "blockwise") p = attention::Path::Blockwise;
    else if (path == "kernel") p = attention::Path::Kernel;
    else throw pybind11::value_error("sdpa path must be 'auto', 'dense', 'blockwise' or 'kernel', not '" + path + "'");
    if (block_keys < 0) throw pybind11::value_error("block_keys must be >= 0");
    attention::set_path_override(p, block_keys);
  });
  // The kernels' loader (torch_tpu/kernels/__init__.py): called with the
  // GIL at the first automatic choice, returns whether it registered the
  // kernels for this plugin.
  m.def("_set_kernel_loader", [](pybind11::function loader) {
    auto* fn = new pybind11::function(std::move(loader));  // never freed: rules may run after the interpreter is gone
    lowering::set_kernel_loader([fn] {
      pybind11::gil_scoped_acquire gil;
      try {
        return (*fn)().cast<bool>();
      } catch (pybind11::error_already_set& e) {
        e.restore();
        PyErr_Clear();
        return false;
      }
    });
  });
  m.def("_set_grouped_mm_path", [](const std::string& path) {
    lowering::KernelChoice c;
    if (path == "auto") c = lowering::KernelChoice::Auto;
    else if (path == "xla") c = lowering::KernelChoice::Xla;
    else if (path == "kernel") c = lowering::KernelChoice::Kernel;
    else throw pybind11::value_error("grouped_mm path must be 'auto', 'xla' or 'kernel', not '" + path + "'");
    lowering::set_grouped_mm_choice(c);
  });
}

}  // namespace tt::backend
