// torch_tpu::nms_keep(boxes, iou_threshold): the keep mask of non-maximum
// suppression over boxes [K, 4] (x1, y1, x2, y2) already sorted by
// decreasing score; torchvision::nms (backend/aten/torchvision_nms.cpp)
// sorts, calls it, and compacts the kept indices.
//
// The IoU of every pair is one [K, K] computation; the suppression is
// sequential (box i suppresses later boxes only while it is kept itself), so
// a while loop walks the K boxes, each step clearing the later boxes that
// overlap box i by more than the threshold where box i is still kept. IoU
// arithmetic is torchvision's CPU kernel's, in the boxes' dtype.
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

Values nms_keep(Builder& b, const Args& a, const Context&) {
  Value boxes = a[0].value();
  if (boxes.rank() != 2 || boxes.shape()[1] != 4)
    throw InvalidArgument("boxes should be a 2d tensor with 4 elements in dimension 1");
  const int64_t K = boxes.shape()[0];
  const DType t = boxes.dtype();
  if (!hlo::is_float(t)) throw NotImplementedForDtype("nms not implemented for an integer dtype");
  if (K == 0) return {b.constant_int(1, DType::Pred, {0})};
  auto col = [&](int64_t j) { return b.reshape(b.slice(boxes, {0, j}, {K, j + 1}), {K}); };
  Value x1 = col(0), y1 = col(1), x2 = col(2), y2 = col(3);
  Value area = b.mul(b.sub(x2, x1), b.sub(y2, y1));
  Shape kk{K, K};
  auto row = [&](Value v) { return b.broadcast_in_dim(v, kk, {0}); };  // box i
  auto colb = [&](Value v) { return b.broadcast_in_dim(v, kk, {1}); };  // box j
  Value zero = b.constant(0, t, kk);
  Value w = b.max(zero, b.sub(b.min(row(x2), colb(x2)), b.max(row(x1), colb(x1))));
  Value h = b.max(zero, b.sub(b.min(row(y2), colb(y2)), b.max(row(y1), colb(y1))));
  Value inter = b.mul(w, h);
  Value iou = b.div(inter, b.sub(b.add(row(area), colb(area)), inter));
  Value later = b.compare(b.iota(Type{DType::S64, kk}, 1), b.iota(Type{DType::S64, kk}, 0), Cmp::GT);
  Value sup = b.and_(b.compare(iou, b.constant(a[1].d, t, kk), Cmp::GT), later);  // [i, j]: i suppresses j
  Value keep0 = b.constant_int(1, DType::Pred, {K});
  Values out = b.while_loop(
      {b.constant_int(0, DType::S64), keep0, sup},
      [K](Builder& bb, const Values& st) {
        return Values{bb.compare(st[0], bb.constant_int(K, DType::S64), Cmp::LT)};
      },
      [K](Builder& bb, const Values& st) {
        Value i = st[0], keep = st[1], sup = st[2];
        Value zero = bb.constant_int(0, DType::S64);
        Value kept = bb.broadcast_in_dim(bb.reshape(bb.dynamic_slice(keep, {i}, {1}), {}), {K}, {});
        Value hits = bb.reshape(bb.dynamic_slice(sup, {i, zero}, {1, K}), {K});
        keep = bb.and_(keep, bb.not_(bb.and_(kept, hits)));
        return Values{bb.add(i, bb.constant_int(1, DType::S64)), keep, sup};
      });
  return {out[1]};
}

TT_RULE({"torch_tpu::nms_keep"}, nms_keep);

}  // namespace
}  // namespace tt::lowering
