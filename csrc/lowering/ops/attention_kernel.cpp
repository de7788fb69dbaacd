// SDPA through the attention kernel: the forward and backward rules
// (attention.cpp) call the external ops that torch_tpu.kernels.attention
// registers, each a JAX function around the Pallas flash-attention kernel,
// inlined into the program as any external op is (external_op.h).
#include "lowering/external_op.h"
#include "lowering/ops/attention_common.h"
#include "lowering/ops/kernel_choice.h"

namespace tt::lowering::attention {
namespace {

constexpr const char* kForward = "tpu_kernels::flash_attention_forward";
constexpr const char* kBackward = "tpu_kernels::flash_attention_backward";
// The kernel's query and key block (torch_tpu/kernels/attention.py).
constexpr int64_t kKernelBlock = 128;

std::vector<HostArg> host_args(bool causal, double scale) {
  HostArg c, s;
  c.kind = HostArg::Kind::Bool;
  c.b = causal;
  s.kind = HostArg::Kind::Double;
  s.d = scale;
  return {c, s};
}

}  // namespace

bool use_kernel(const Geometry& g, bool has_mask, DType dtype) {
  if (g.s == 0 || g.l == 0 || has_mask || g.hq != g.hk || g.e != g.ev || dtype == DType::F64) return false;
  switch (path_override()) {
    case Path::Kernel: return true;
    case Path::Auto:
      return g.l % kKernelBlock == 0 && g.s % kKernelBlock == 0 && kernels_for_plugin() && is_external_op(kForward) &&
             is_external_op(kBackward);
    default: return false;
  }
}

Values kernel_forward(Builder& b, const Context& ctx, Value q, Value k, Value v, bool causal, double scale) {
  return call_external(kForward, b, Values{q, k, v}, host_args(causal, scale), ctx);
}

Values kernel_backward(Builder& b, const Context& ctx, Value dout, Value q, Value k, Value v, Value out, Value lse,
                       bool causal, double scale) {
  DType t = q.dtype();
  return call_external(kBackward, b, Values{b.convert(dout, t), q, k, v, b.convert(out, t), b.convert(lse, DType::F32)},
                       host_args(causal, scale), ctx);
}

}  // namespace tt::lowering::attention
