// The eager executor: ATen op -> lowering rule -> StableHLO program ->
// compiled once per cache key -> executed asynchronously on the PJRT device.
//
// The cache key is the op, every tensor's dtype and view geometry (sizes,
// strides, offset, and which storage it reads), its storage's buffer shape,
// and every non-tensor argument except Scalars, which travel as runtime
// inputs so that a changing learning rate does not recompile.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>

#include "backend/device/device_storage.h"
#include "backend/pipeline/op_plan.h"
#include "lowering/helpers.h"
#include "lowering/rule.h"

namespace tt::backend {

// Runs `op` (whose arguments are on top of `stack`) natively per `plan`.
// Falls back to the CPU (visibly) when the rule cannot lower these arguments.
void execute(const OpPlan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs an out= op: the functional op, then resize and copy into the out
// arguments with PyTorch's casting rules.
void execute_out(const c10::OperatorHandle& functional_op, const c10::OperatorHandle& op,
                 torch::jit::Stack* stack);

// The float32 matmul precision as the lowering layer names it:
// torch.tpu.precision's when set (compile_settings.h), else
// torch.get_float32_matmul_precision()'s.
lowering::MatmulPrecision current_matmul_precision();

// `t` when it covers its storage exactly (same dtype, row-major), else a
// contiguous clone: a tensor whose storage contents are `t`'s values.
at::Tensor dense_tensor(const at::Tensor& t);
// A dense buffer of `t`'s values in row-major order (its storage's buffer
// when `t` already covers it; else the result of a program).
runtime::BufferPtr dense_buffer(const at::Tensor& t);

}  // namespace tt::backend
