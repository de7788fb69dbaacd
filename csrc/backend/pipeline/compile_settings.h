// The settings of tpu programs that Python sets, all per process:
// torch.tpu.precision (lowering), torch.backends.tpu.allow_excess_precision
// and xla_optimization_level (XLA options, runtime/compile_options.h).
#pragma once

#include <pybind11/pybind11.h>

namespace tt::backend {

// The float32 matmul precision set by torch.tpu.precision, as a
// lowering::MatmulPrecision value, or -1 when unset (then
// torch.get_float32_matmul_precision() decides; executor.h,
// current_matmul_precision()). Per process, like PyTorch's own setting and
// unlike TorchTPU's per-thread one: the autograd engine runs a tpu backward
// on its device thread, which must compute with the forward's setting.
int matmul_precision_override();
void set_matmul_precision_override(int precision);

void bind_compile_settings(pybind11::module_& m);

}  // namespace tt::backend
