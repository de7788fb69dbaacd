// torch.unique (_unique2, _unique) and unique_consecutive over the flattened
// input: the number of distinct values depends on the data, so the host
// reads one count (a synchronisation, as on CUDA); everything else runs as
// tpu programs. A stable sort (unique only) brings equal values together;
// a run starts where a value differs from its predecessor (NaNs never equal,
// so each NaN is its own value, as on the CPU); a cumulative sum of run
// starts numbers the runs. Values come out sorted whatever `sorted` says,
// as PyTorch's CPU kernel returns them. unique_consecutive along a dim runs
// on the CPU (counted as a fallback).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "backend/pipeline/cpu_fallback.h"

namespace tt::backend {
namespace {

struct Unique {
  at::Tensor values, inverse, counts;
};

Unique unique_flat(const at::Tensor& self, bool sort, bool return_inverse, bool return_counts) {
  at::Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  auto longs = self.options().dtype(at::kLong);
  at::Tensor empty_long = at::empty({0}, longs);
  if (n == 0)
    return {at::empty({0}, self.options()), return_inverse ? at::empty(self.sizes(), longs) : empty_long,
            return_counts ? at::empty({0}, longs) : empty_long};
  at::Tensor ordered = flat, order;
  if (sort) std::tie(ordered, order) = flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor starts = at::cat({at::ones({1}, self.options().dtype(at::kBool)),
                               ordered.narrow(0, 1, n - 1).ne(ordered.narrow(0, 0, n - 1))});
  at::Tensor run = starts.to(at::kLong).cumsum(0).sub_(1);  // run number of each ordered element
  const int64_t k = run[n - 1].item<int64_t>() + 1;
  Unique u;
  u.values = at::empty({k}, self.options()).scatter_(0, run, ordered);
  u.inverse = empty_long;
  if (return_inverse) {
    u.inverse = sort ? at::empty({n}, longs).scatter_(0, order, run) : run;
    u.inverse = u.inverse.reshape(self.sizes());
  }
  u.counts = return_counts ? at::zeros({k}, longs).index_add_(0, run, at::ones({n}, longs)) : empty_long;
  return u;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  Unique u = unique_flat(self, true, return_inverse, return_counts);
  return {u.values, u.inverse, u.counts};
}

std::tuple<at::Tensor, at::Tensor> unique1(const at::Tensor& self, bool sorted, bool return_inverse) {
  Unique u = unique_flat(self, true, return_inverse, false);
  return {u.values, u.inverse};
}

// unique_consecutive(self, return_inverse, return_counts, dim): boxed, so
// that the dim form can go to the CPU.
void unique_consecutive(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 4);
  if (!args[3].isNone()) {
    run_cpu_fallback(op, stack, "unique_consecutive along a dim has no tpu kernel");
    return;
  }
  Unique u = unique_flat(args[0].toTensor(), false, args[1].toBool(), args[2].toBool());
  torch::jit::drop(*stack, 4);
  stack->push_back(u.values);
  stack->push_back(u.inverse);
  stack->push_back(u.counts);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique2", unique2);
  m.impl("_unique", unique1);
  m.impl("unique_consecutive", torch::CppFunction::makeFromBoxedFunction<&unique_consecutive>());
}

}  // namespace
}  // namespace tt::backend
