#include "backend/distributed/spmd_collectives.h"

#include <c10/util/Exception.h>

#include <map>
#include <mutex>

#include "backend/device/device_storage.h"
#include "backend/device/storage_contents.h"
#include "backend/pipeline/executor.h"
#include "backend/pipeline/program_runner.h"
#include "hlo/builder.h"
#include "runtime/runtime.h"

namespace tt::backend::dist {
namespace {

const char* reduce_op_name(const std::string& op, at::ScalarType dtype) {
  const bool is_bool = dtype == at::kBool;
  TORCH_CHECK_TYPE(!is_bool, "spmd collectives: reductions on torch.bool are not supported");
  if (op == "sum" || op == "avg") return "stablehlo.add";
  if (op == "product") return "stablehlo.multiply";
  if (op == "min") return "stablehlo.minimum";
  if (op == "max") return "stablehlo.maximum";
  TORCH_CHECK_VALUE(false, "spmd collectives: unknown reduce op '", op, "' (sum, product, min, max, avg)");
  return nullptr;
}

// Replica i's dim `dim` normalised, with a clear error when out of range.
int64_t norm_dim(int64_t dim, int64_t rank, const char* what) {
  TORCH_CHECK_VALUE(rank > 0, "spmd ", what, ": needs tensors of at least one dimension");
  TORCH_CHECK_VALUE(dim >= -rank && dim < rank, "spmd ", what, ": dim ", dim, " is out of range for ", rank,
                    "-d tensors");
  return dim < 0 ? dim + rank : dim;
}

}  // namespace

std::string spmd_program_text(const SpmdCollective& c, int64_t n, at::IntArrayRef sizes, at::ScalarType dtype) {
  TORCH_CHECK_VALUE(n >= 1, "spmd collectives: no tensors");
  hlo::Builder b;
  b.set_num_replicas(static_cast<int>(n));
  hlo::Type t{hlo_dtype(dtype), std::vector<int64_t>(sizes.begin(), sizes.end())};
  hlo::Value x = b.param(t);
  std::vector<int64_t> all(n);
  for (int64_t i = 0; i < n; ++i) all[i] = i;
  const hlo::Builder::Groups groups{all};
  const int64_t rank = t.rank();
  hlo::Value y;
  try {
    if (c.kind == "all_reduce") {
      const char* op = reduce_op_name(c.reduce_op, dtype);
      TORCH_CHECK_TYPE(c.reduce_op != "avg" || at::isFloatingType(dtype) || at::isComplexType(dtype),
                       "spmd all_reduce: avg needs a floating dtype, got ", dtype);
      y = b.all_reduce(x, op, groups);
      if (c.reduce_op == "avg") y = b.div(y, b.constant(static_cast<double>(n), t.dtype, t.shape));
    } else if (c.kind == "all_gather") {
      y = b.all_gather(x, norm_dim(c.dim, rank, "all_gather"), groups);
    } else if (c.kind == "reduce_scatter") {
      const char* op = reduce_op_name(c.reduce_op, dtype);
      TORCH_CHECK_TYPE(c.reduce_op != "avg" || at::isFloatingType(dtype),
                       "spmd reduce_scatter: avg needs a floating dtype, got ", dtype);
      int64_t d = norm_dim(c.dim, rank, "reduce_scatter");
      TORCH_CHECK_VALUE(t.shape[d] % n == 0, "spmd reduce_scatter: dim ", d, " has size ", t.shape[d],
                        ", which does not divide by the ", n, " devices");
      y = b.reduce_scatter(x, d, op, groups);
      if (c.reduce_op == "avg") y = b.div(y, b.constant(static_cast<double>(n), y.dtype(), y.shape()));
    } else if (c.kind == "all_to_all") {
      int64_t s = norm_dim(c.dim, rank, "all_to_all");
      int64_t cd = norm_dim(c.concat_dim, rank, "all_to_all");
      TORCH_CHECK_VALUE(t.shape[s] % n == 0, "spmd all_to_all: split dim ", s, " has size ", t.shape[s],
                        ", which does not divide by the ", n, " devices");
      y = b.all_to_all(x, s, cd, groups);
    } else if (c.kind == "permute") {
      for (const auto& [src, dst] : c.pairs)
        TORCH_CHECK_VALUE(src >= 0 && src < n && dst >= 0 && dst < n, "spmd permute: pair (", src, ", ", dst,
                          ") names a device index outside 0..", n - 1);
      y = b.collective_permute(x, c.pairs);
    } else {
      TORCH_CHECK_VALUE(false, "spmd collectives: unknown collective '", c.kind, "'");
    }
  } catch (const hlo::BuildError& e) {
    TORCH_CHECK_VALUE(false, "spmd ", c.kind, ": ", e.what());
  }
  b.set_results({y});
  return b.module_text();
}

std::vector<at::Tensor> spmd_run(const SpmdCollective& c, const std::vector<at::Tensor>& tensors) {
  const int64_t n = static_cast<int64_t>(tensors.size());
  TORCH_CHECK_VALUE(n >= 1, "spmd ", c.kind, ": expected one tpu tensor per device, got none");
  std::vector<int> devices;
  for (int64_t i = 0; i < n; ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK_VALUE(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, "spmd ", c.kind,
                      ": tensor ", i, " is not a tpu tensor");
    TORCH_CHECK_VALUE(t.sizes() == tensors[0].sizes() && t.scalar_type() == tensors[0].scalar_type(), "spmd ",
                      c.kind, ": tensor ", i, " is ", t.scalar_type(), t.sizes(), " but tensor 0 is ",
                      tensors[0].scalar_type(), tensors[0].sizes(), "; all must match");
    devices.push_back(t.device().index());
  }
  const std::string text = spmd_program_text(c, n, tensors[0].sizes(), tensors[0].scalar_type());

  runtime::ExecutablePtr exe = replicated_program(text, devices, "the spmd " + c.kind + " program");
  std::vector<runtime::BufferPtr> keep;
  std::vector<std::vector<runtime::Buffer*>> args(n);
  for (int64_t i = 0; i < n; ++i) {
    keep.push_back(dense_buffer(tensors[i]));
    args[i].push_back(keep.back().get());
  }
  auto outs = exe->ExecuteReplicated(args);
  std::vector<at::Tensor> result;
  for (int64_t i = 0; i < n; ++i) {
    const runtime::BufferPtr& o = outs[i].at(0);
    result.push_back(wrap_buffer(o, o->dims(), tensors[i].scalar_type()));
  }
  return result;
}

}  // namespace tt::backend::dist
