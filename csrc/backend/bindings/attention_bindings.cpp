// _set_sdpa_path(path, block_keys): forces the dense, the blockwise or the
// kernel SDPA lowering ("auto", "dense", "blockwise", "kernel") and the key block size (0: the
// default), for programs built after the call. Benchmarks and tests use it
// through torch_tpu._sdpa_path, which also drops the program cache.
#include "backend/bindings/attention_bindings.h"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "lowering/ops/attention_common.h"

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
  // The attention kernel's loader (torch_tpu/kernels/__init__.py): called
  // with the GIL at the first automatic choice, returns whether it
  // registered the kernel for this plugin.
  m.def("_set_attention_kernel_loader", [](pybind11::function loader) {
    auto* fn = new pybind11::function(std::move(loader));  // never freed: rules may run after the interpreter is gone
    attention::set_kernel_loader([fn] {
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
}

}  // namespace tt::backend
