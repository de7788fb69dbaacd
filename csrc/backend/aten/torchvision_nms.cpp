// torchvision::nms(dets, scores, iou_threshold) -> indices of the kept boxes
// by decreasing score. How many survive depends on the data, so the host
// reads one count (a synchronisation, as the CUDA kernel makes); the rest
// runs as tpu programs: a stable sort by score, the keep mask of the sorted
// boxes (torch_tpu::nms_keep, lowering/ops/torchvision_nms.cpp), and the
// compaction of the kept positions (masked_select, as nonzero.cpp does).
// The kernel is registered by name: torchvision may load after torch_tpu.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace tt::backend {
namespace {

at::Tensor nms(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  // torchvision's own checks (ops/cpu/nms_kernel.cpp).
  TORCH_CHECK(dets.dim() == 2, "boxes should be a 2d tensor, got ", dets.dim(), "D");
  TORCH_CHECK(dets.size(1) == 4, "boxes should have 4 elements in dimension 1, got ", dets.size(1));
  TORCH_CHECK(scores.dim() == 1, "scores should be a 1d tensor, got ", scores.dim(), "D");
  TORCH_CHECK(dets.size(0) == scores.size(0), "boxes and scores should have same number of elements in ",
              "dimension 0, got ", dets.size(0), " and ", scores.size(0));
  TORCH_CHECK(dets.scalar_type() == scores.scalar_type(), "dets should have the same type as scores");
  if (dets.numel() == 0) return at::empty({0}, dets.options().dtype(at::kLong));
  at::Tensor order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  static auto keep_op = c10::Dispatcher::singleton()
                            .findSchemaOrThrow("torch_tpu::nms_keep", "")
                            .typed<at::Tensor(const at::Tensor&, double)>();
  at::Tensor keep = keep_op.call(dets.index_select(0, order).contiguous(), iou_threshold);
  return order.masked_select(keep);
}

TORCH_LIBRARY(torch_tpu, m) {
  m.def("nms_keep(Tensor boxes, float iou_threshold) -> Tensor");
}

TORCH_LIBRARY_IMPL(torchvision, PrivateUse1, m) { m.impl("nms", nms); }

}  // namespace
}  // namespace tt::backend
