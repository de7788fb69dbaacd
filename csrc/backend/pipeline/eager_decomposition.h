// Eager decompositions: an op without a lowering rule is first offered to
// PyTorch's own decomposition of it (torch._decomp), run op by op on tpu.
// Python decides (torch_tpu/_eager_decompositions.py), once per op and
// argument signature, whether every op the decomposition expands to runs
// natively; when one would not, the op falls back to the CPU whole, with that
// reason. This file only hands a call from the CPU fallback kernel to Python.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <pybind11/pybind11.h>

#include <string>

namespace tt::backend {

// Runs `op` (its arguments on top of `stack`) through its decomposition and
// returns true, leaving the results on the stack. Returns false, the stack
// untouched and `reason` saying why, when the call must go to the CPU.
// Errors the op raises for its arguments (PyTorch's own checks) propagate.
bool try_eager_decomposition(const c10::OperatorHandle& op, torch::jit::Stack* stack, std::string* reason);

// Installs the Python decider, called with the GIL held:
// handler(op_name, args) -> (True, result) | (False, reason, for_every_call).
// `args` are the op's arguments in schema order; for_every_call marks an op
// with no decomposition at all, which is then never offered again.
void set_eager_decomposition_handler(pybind11::object handler);

}  // namespace tt::backend
