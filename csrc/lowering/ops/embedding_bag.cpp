// EmbeddingBag: _embedding_bag / _embedding_bag_forward_only (the sum, mean
// or max of the weight rows of each bag; per_sample_weights, padding_idx,
// include_last_offset) and their backward (_embedding_bag_backward for dense
// gradients, _embedding_bag_dense_backward,
// _embedding_bag_per_sample_weights_backward).
//
// Bag b holds the indices at positions [offsets[b], offsets[b+1]) (the last
// bag runs to the end, or to offsets[B] with include_last_offset). Indices
// equal to padding_idx count in no bag. An empty bag gives zeros. Sums of
// f16/bf16 weights accumulate in f32, as the CPU's.
//
// The auxiliary results have the shapes of PyTorch's meta kernel for a
// non-CPU device (CUDA's): offset2bag [N] (the bag of each index; an index
// past the last bag gets bag B), bag_size [offsets.size(0)] (non-padding
// indices per bag for mean and max; zeros for sum, as the CPU's), and
// max_indices [B, D] for max (the weight row that gave each maximum, the first
// one on ties and the first NaN, as the CPU; 0 for an empty bag), else [0].
//
// Device checks, as the CPU kernel raises them: offsets[0] must be 0 and
// offsets[-1] at most N; every index in [0, num_weights). The CPU words a bad
// index two ways: its fast path (sum or mean of f32/f16/bf16 weights with
// unit column stride, no padding_idx) names the position; the other path
// names only the value. A weight seen as non-contiguous takes the second
// wording here (the CPU decides by its column stride alone).
#include "lowering/device_check.h"
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// Inclusive prefix sum of a 1-D value.
Value prefix_sum(Builder& b, Value x) {
  int64_t n = x.shape()[0];
  return b.reduce_window({x}, {b.constant(0, x.dtype())}, {n}, {1}, {1}, {1}, {{n - 1, 0}},
                         [](Builder& b, const Values& v) { return Values{b.add(v[0], v[1])}; })[0];
}

hlo::Body add_body() {
  return [](Builder& b, const Values& v) { return Values{b.add(v[0], v[1])}; };
}

// rows[i] of x [R, D] for rows [N] s64 (in range) -> [N, D].
Value gather_rows(Builder& b, Value x, Value rows) {
  int64_t n = rows.shape()[0], d = x.shape()[1];
  hlo::Builder::GatherDims dn;
  dn.offset_dims = {1};
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  return b.gather(x, b.reshape(rows, {n, 1}), dn, {1, d}, {n, d});
}

// base [R, D] with updates [N, D] combined into rows[i] (s64, in range).
Value scatter_rows(Builder& b, Value base, Value rows, Value updates, const hlo::Body& combine) {
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = {1};
  dn.inserted_window_dims = {0};
  dn.scatter_dims_to_operand_dims = {0};
  dn.index_vector_dim = 1;
  return b.scatter(base, b.reshape(rows, {rows.shape()[0], 1}), updates, dn, combine);
}

// base [R] with updates [N] combined at positions pos[i] (s64, in range).
Value scatter_1d(Builder& b, Value base, Value pos, Value updates, const hlo::Body& combine) {
  hlo::Builder::ScatterDims dn;
  dn.inserted_window_dims = {0};
  dn.scatter_dims_to_operand_dims = {0};
  dn.index_vector_dim = 1;
  return b.scatter(base, b.reshape(pos, {pos.shape()[0], 1}), updates, dn, combine);
}

Value clamp_to(Builder& b, Value i, int64_t hi) {
  const Shape& s = i.shape();
  return b.clamp(b.constant_int(0, DType::S64, s), i, b.constant_int(std::max<int64_t>(hi - 1, 0), DType::S64, s));
}

// The bag of each of N indices: the number of offsets[1..] at or before its
// position (offsets[0] is 0, checked). Positions past the last bag's end get
// num_bags.
Value offset_to_bag(Builder& b, Value offsets, int64_t n) {
  Value off = b.convert(offsets, DType::S64);
  int64_t k = off.shape()[0];
  if (k <= 1 || n == 0) return b.constant_int(0, DType::S64, {n});
  Value starts = b.slice(off, {1}, {k});
  Value in = b.and_(b.compare(starts, b.constant_int(0, DType::S64, {k - 1}), Cmp::GE),
                    b.compare(starts, b.constant_int(n, DType::S64, {k - 1}), Cmp::LT));
  Value marks = scatter_1d(b, b.constant_int(0, DType::S64, {n}), clamp_to(b, starts, n),
                           b.convert(in, DType::S64), add_body());
  return prefix_sum(b, marks);
}

// The index positions that count: inside a bag and not padding_idx.
Value counted(Builder& b, Value idx, Value bag, int64_t num_bags, int64_t padding_idx) {
  const Shape& s = idx.shape();
  Value ok = b.compare(bag, b.constant_int(num_bags, DType::S64, s), Cmp::LT);
  if (padding_idx >= 0) ok = b.and_(ok, b.compare(idx, b.constant_int(padding_idx, DType::S64, s), Cmp::NE));
  return ok;
}

Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }

void check_inputs(Builder& b, const Context& c, Value idx, Value offsets, int64_t num_weights, bool fast_path) {
  int64_t n = idx.shape()[0], k = offsets.type.numel();
  if (k > 0) {
    Value off = b.convert(offsets, DType::S64);
    Value first = b.reshape(b.slice(off, {0}, {1}), {});
    Value last = b.reshape(b.slice(off, {k - 1}, {k}), {});
    add_check(b, c, b.compare(first, b.constant_int(0, DType::S64), Cmp::NE), first, CheckError::Runtime,
              "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
              "However, got {}");
    add_check(b, c, b.compare(last, b.constant_int(n, DType::S64), Cmp::GT), last, CheckError::Runtime,
              "offsets[-1] can not be greater than input's length " + std::to_string(n) +
                  " but got offsets[-1] of {}");
  }
  if (n == 0) return;
  Value bad = b.or_(b.compare(idx, b.constant_int(0, DType::S64, {n}), Cmp::LT),
                    b.compare(idx, b.constant_int(num_weights, DType::S64, {n}), Cmp::GE));
  check_first(b, c, bad, idx, CheckError::Runtime,
              fast_path ? "Index {pos} of input takes value {} which is not in the valid range [0, " +
                              std::to_string(num_weights) + ")"
                        : "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {}");
}

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights, include_last_offset, padding_idx)
//   -> (output, offset2bag, bag_size, max_indices)
Values embedding_bag(Builder& b, const Args& a, const Context& c) {
  Value w = a[0].value();
  int64_t mode = a[4].i, padding_idx = a[8].i;
  if (w.rank() != 2)
    throw InvalidArgument("weight has to be a 2D Tensor, but got Tensor of dimension " + std::to_string(w.rank()));
  if (a[1].value().rank() != 1)
    throw InvalidArgument("embedding_bag: Expected 1-dimensional indices, got " +
                          std::to_string(a[1].value().rank()) + "-dimensional");
  if (a[2].value().rank() != 1)
    throw InvalidArgument("embedding_bag: Expected 1-dimensional offsets, got " +
                          std::to_string(a[2].value().rank()) + "-dimensional");
  if (mode != kSum && mode != kMean && mode != kMax) throw InvalidArgument("embedding_bag: unknown mode " + std::to_string(mode));
  const Type& out = c.out(0);
  int64_t num_weights = w.shape()[0], d = w.shape()[1], num_bags = out.shape[0];
  int64_t n = a[1].value().shape()[0], k = a[2].value().shape()[0];
  Value idx = b.convert(a[1].value(), DType::S64);
  DType t = w.dtype(), acc = compute_dtype(t);
  bool fast_path = mode != kMax && (t == DType::F32 || t == DType::F16 || t == DType::BF16) && padding_idx < 0 &&
                   a[0].contiguous;
  check_inputs(b, c, idx, a[2].value(), num_weights, fast_path);

  Value bag = offset_to_bag(b, a[2].value(), n);
  Value ok = counted(b, idx, bag, num_bags, padding_idx);
  Value slot = clamp_to(b, bag, num_bags);
  Value count = num_bags == 0 || n == 0 ? b.constant_int(0, DType::S64, {num_bags})
                                        : scatter_1d(b, b.constant_int(0, DType::S64, {num_bags}), slot,
                                                     b.convert(ok, DType::S64), add_body());
  Shape nd{n, d}, bd{num_bags, d};
  Value rows = n == 0 ? b.constant(0, acc, nd) : gather_rows(b, b.convert(w, acc), clamp_to(b, idx, num_weights));
  if (!a[6].is_none()) rows = b.mul(rows, b.broadcast_in_dim(b.convert(a[6].value(), acc), nd, {0}));
  Value ok2 = b.broadcast_in_dim(ok, nd, {0});
  Value result, max_indices;
  if (mode == kMax) {
    Value lowest = b.broadcast_in_dim(extreme_identity(b, acc, true), nd, {});
    Value m = b.broadcast_in_dim(extreme_identity(b, acc, true), bd, {});
    if (n > 0 && num_bags > 0)
      m = scatter_rows(b, m, slot, b.select(ok2, rows, lowest),
                       [](Builder& b, const Values& v) { return Values{b.max(v[0], v[1])}; });
    Value filled = b.broadcast_in_dim(b.compare(count, b.constant_int(0, DType::S64, {num_bags}), Cmp::GT), bd, {0});
    result = b.select(filled, m, b.constant(0, acc, bd));
    // The first position reaching each maximum, then its weight row.
    Value first = b.constant_int(n, DType::S64, bd);
    if (n > 0 && num_bags > 0) {
      Value at = gather_rows(b, m, slot);
      Value hit = b.and_(ok2, b.or_(b.compare(rows, at, Cmp::EQ), b.and_(is_nan(b, rows), is_nan(b, at))));
      Value pos = b.select(hit, b.iota(Type{DType::S64, nd}, 0), b.constant_int(n, DType::S64, nd));
      first = scatter_rows(b, first, slot, pos, [](Builder& b, const Values& v) { return Values{b.min(v[0], v[1])}; });
      Value fi = b.reshape(clamp_to(b, first, n), {num_bags * d});
      hlo::Builder::GatherDims dn;
      dn.collapsed_slice_dims = {0};
      dn.start_index_map = {0};
      dn.index_vector_dim = 1;
      Value row_of = b.reshape(b.gather(idx, b.reshape(fi, {num_bags * d, 1}), dn, {1}, {num_bags * d}), bd);
      max_indices = b.select(filled, row_of, b.constant_int(0, DType::S64, bd));
    } else {
      max_indices = b.constant_int(0, DType::S64, bd);
    }
  } else {
    Value sum = b.constant(0, acc, bd);
    if (n > 0 && num_bags > 0) sum = scatter_rows(b, sum, slot, b.select(ok2, rows, b.constant(0, acc, nd)), add_body());
    if (mode == kMean) {
      Value denom = b.convert(b.max(count, b.constant_int(1, DType::S64, {num_bags})), acc);
      sum = b.div(sum, b.broadcast_in_dim(denom, bd, {0}));
    }
    result = sum;
    max_indices = b.constant_int(0, DType::S64, c.out(3).shape);
  }
  // bag_size has offsets.size(0) entries (one more than the bags with
  // include_last_offset; that one is 0).
  Value bag_size = mode == kSum ? b.constant_int(0, DType::S64, {k})
                                : (k > num_bags ? b.pad(count, b.constant_int(0, DType::S64), {0}, {k - num_bags}, {0})
                                                : count);
  return Values{b.convert(result, out.dtype), b.convert(bag, c.out(1).dtype), b.convert(bag_size, c.out(2).dtype),
                b.convert(max_indices, c.out(3).dtype)};
}

TT_RULE({"aten::_embedding_bag", "aten::_embedding_bag_forward_only"}, embedding_bag);

// The weight gradient [num_weights, D] of a dense embedding bag, from
// grad [B, D] and the forward's offset2bag / bag_size / max_indices.
Value dense_backward(Builder& b, const Context& c, Value grad, Value indices, Value offset2bag, Value bag_size,
                     Value max_indices, int64_t num_weights, bool scale_grad_by_freq, int64_t mode,
                     const Arg& per_sample_weights, int64_t padding_idx) {
  const Type& out = c.out();
  DType acc = compute_dtype(out.dtype);
  int64_t num_bags = grad.shape()[0], d = grad.shape()[1], n = indices.type.numel();
  Shape wd{num_weights, d};
  Value g = b.convert(grad, acc);
  Value result = b.constant(0, acc, wd);
  if (num_bags == 0 || d == 0 || num_weights == 0) return result;
  Value sizes = b.slice(b.convert(bag_size, DType::S64), {0}, {num_bags});
  if (mode == kMax) {
    // grad[b, j] lands on row max_indices[b, j] of column j, for non-empty bags.
    Shape bd{num_bags, d};
    Value filled = b.broadcast_in_dim(b.compare(sizes, b.constant_int(0, DType::S64, {num_bags}), Cmp::GT), bd, {0});
    Value rows = clamp_to(b, b.convert(max_indices, DType::S64), num_weights);
    Shape one{num_bags, d, 1};
    Value coords = b.concatenate({b.reshape(rows, one), b.reshape(b.iota(Type{DType::S64, bd}, 1), one)}, 2);
    hlo::Builder::ScatterDims dn;
    dn.inserted_window_dims = {0, 1};
    dn.scatter_dims_to_operand_dims = {0, 1};
    dn.index_vector_dim = 2;
    return b.scatter(result, coords, b.select(filled, g, b.constant(0, acc, bd)), dn, add_body());
  }
  if (n == 0) return result;
  Value idx = b.reshape(b.convert(indices, DType::S64), {n});
  Value bag = b.reshape(b.convert(offset2bag, DType::S64), {n});
  Value ok = counted(b, idx, bag, num_bags, padding_idx);
  Value slot = clamp_to(b, bag, num_bags);
  Shape nd{n, d};
  Value rows = gather_rows(b, g, slot);
  if (!per_sample_weights.is_none())
    rows = b.mul(rows, b.broadcast_in_dim(b.convert(per_sample_weights.value(), acc), nd, {0}));
  if (mode == kMean) {
    hlo::Builder::GatherDims dn;
    dn.collapsed_slice_dims = {0};
    dn.start_index_map = {0};
    dn.index_vector_dim = 1;
    Value size = b.gather(sizes, b.reshape(slot, {n, 1}), dn, {1}, {n});
    size = b.convert(b.max(size, b.constant_int(1, DType::S64, {n})), acc);
    rows = b.div(rows, b.broadcast_in_dim(size, nd, {0}));
  }
  Value target = clamp_to(b, idx, num_weights);
  rows = b.select(b.broadcast_in_dim(ok, nd, {0}), rows, b.constant(0, acc, nd));
  result = scatter_rows(b, result, target, rows, add_body());
  if (scale_grad_by_freq) {
    // Each row divided by how often its index occurs among all indices.
    Value counts = scatter_1d(b, b.constant(0, acc, {num_weights}), target, b.constant(1, acc, {n}), add_body());
    counts = b.max(counts, b.constant(1, acc, {num_weights}));
    result = b.div(result, b.broadcast_in_dim(counts, wd, {0}));
  }
  return result;
}

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, per_sample_weights,
// padding_idx)
TT_RULE({"aten::_embedding_bag_dense_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value r = dense_backward(b, c, a[0].value(), a[1].value(), a[2].value(), a[3].value(), a[4].value(), a[5].i, a[6].b,
                           a[7].i, a[8], a[9].i);
  return Values{b.convert(r, c.out().dtype)};
});

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
// per_sample_weights, padding_idx): the dense gradient (a sparse one has no
// tpu layout).
TT_RULE({"aten::_embedding_bag_backward"}, [](Builder& b, const Args& a, const Context& c) {
  if (a[9].b) throw LoweringError("embedding_bag: sparse gradients have no tpu layout");
  Value r = dense_backward(b, c, a[0].value(), a[1].value(), a[3].value(), a[4].value(), a[5].value(), a[6].i, a[7].b,
                           a[8].i, a[10], a[11].i);
  return Values{b.convert(r, c.out().dtype)};
});

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets,
// offset2bag, mode, padding_idx) -> [N]: grad[bag(i)] . weight[indices[i]].
TT_RULE({"aten::_embedding_bag_per_sample_weights_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value grad = a[0].value(), w = a[1].value();
  int64_t n = a[2].value().type.numel(), num_bags = grad.shape()[0];
  int64_t num_weights = w.shape()[0], padding_idx = a[6].i;
  DType acc = compute_dtype(out.dtype);
  if (n == 0 || num_bags == 0 || num_weights == 0) return Values{b.constant(0, out.dtype, out.shape)};
  Value idx = b.reshape(b.convert(a[2].value(), DType::S64), {n});
  Value bag = b.reshape(b.convert(a[4].value(), DType::S64), {n});
  Value ok = counted(b, idx, bag, num_bags, padding_idx);
  Value g = gather_rows(b, b.convert(grad, acc), clamp_to(b, bag, num_bags));
  Value rows = gather_rows(b, b.convert(w, acc), clamp_to(b, idx, num_weights));
  Value dot = reduce_sum(b, b.mul(g, rows), {1});
  return Values{b.convert(b.select(ok, dot, b.constant(0, acc, {n})), out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
