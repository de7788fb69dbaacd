// Indexing: index_select, gather, scatter / scatter_add, advanced indexing
// (index.Tensor) and index_put, embedding's backward. Negative indices are
// wrapped as PyTorch does; out-of-range indices are not checked on the device
// (StableHLO gather clamps and scatter drops them).
#include <algorithm>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// idx (any integer type) as s64 with negative values wrapped by `size`.
Value wrap_index(Builder& b, Value idx, int64_t size) {
  Value i = b.convert(idx, DType::S64);
  Value neg = b.compare(i, b.constant_int(0, DType::S64, i.shape()), hlo::Cmp::LT);
  return b.select(neg, b.add(i, b.constant_int(size, DType::S64, i.shape())), i);
}

// Full coordinates for gather/scatter along `dim`: shape index.shape + [rank],
// coordinate d is `index` for d == dim and iota over d otherwise.
Value coordinates(Builder& b, Value index, int64_t dim, int64_t size) {
  Shape s = index.shape();
  Shape s1 = s;
  s1.push_back(1);
  Values parts;
  for (int64_t d = 0; d < index.rank(); ++d) {
    Value v = d == dim ? wrap_index(b, index, size) : b.iota(Type{DType::S64, s}, d);
    parts.push_back(b.reshape(v, s1));
  }
  return b.concatenate(parts, index.rank());
}

TT_RULE({"aten::index_select"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (x.rank() == 0) return Values{b.reshape(x, c.out().shape)};
  Value idx = a[2].value();
  int64_t n = idx.type.numel();
  idx = b.reshape(wrap_index(b, idx, x.shape()[dim]), {n, 1});
  hlo::Builder::GatherDims dn;
  for (int64_t d = 0; d < x.rank(); ++d) if (d != dim) dn.offset_dims.push_back(d);
  dn.collapsed_slice_dims = {dim};
  dn.start_index_map = {dim};
  dn.index_vector_dim = 1;
  Shape sizes = x.shape();
  sizes[dim] = 1;
  Shape out = x.shape();
  out[dim] = n;
  return Values{b.reshape(b.gather(x, idx, dn, sizes, out), c.out().shape)};
});

TT_RULE({"aten::gather"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), index = a[2].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (index.type.numel() == 0) return Values{full(b, 0, c.out().dtype, c.out().shape)};
  if (x.rank() == 0) return Values{b.broadcast_in_dim(x, c.out().shape, {})};  // index must be 0
  Value coords = coordinates(b, index, dim, x.shape()[dim]);
  hlo::Builder::GatherDims dn;
  for (int64_t d = 0; d < x.rank(); ++d) {
    dn.collapsed_slice_dims.push_back(d);
    dn.start_index_map.push_back(d);
  }
  dn.index_vector_dim = index.rank();
  return Values{b.gather(x, coords, dn, std::vector<int64_t>(x.rank(), 1), index.shape())};
});

hlo::Body combiner(const std::string& reduce) {
  if (reduce.empty()) return nullptr;
  return [reduce](Builder& b, const Values& v) {
    if (reduce == "add" || reduce == "sum") return Values{v[0].dtype() == DType::Pred ? b.or_(v[0], v[1]) : b.add(v[0], v[1])};
    if (reduce == "multiply" || reduce == "prod") return Values{b.mul(v[0], v[1])};
    if (reduce == "amax") return Values{b.max(v[0], v[1])};
    if (reduce == "amin") return Values{b.min(v[0], v[1])};
    throw LoweringError("scatter: unsupported reduce '" + reduce + "'");
  };
}

// scatter(self, dim, index, src | value [, reduce]) and scatter_add.
Values scatter_rule(Builder& b, const Args& a, const Context& c, const std::string& reduce) {
  Value x = a[0].value(), index = a[2].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (index.type.numel() == 0) return {x};
  if (x.rank() == 0) {
    // A 0-d target has one element: the (single) source value lands on it.
    Value v = a[3].kind == Arg::Kind::Tensor ? b.reshape(b.slice(b.reshape(b.convert(a[3].value(), x.dtype()), {a[3].value().type.numel()}), {0}, {1}), {})
                                             : b.convert(a[3].value(), x.dtype());
    hlo::Body f = combiner(reduce);
    return {f ? f(b, {x, v})[0] : v};
  }
  Value src;
  if (a[3].kind == Arg::Kind::Tensor) {
    src = b.convert(a[3].value(), x.dtype());
    std::vector<int64_t> zero(src.rank(), 0);
    src = b.slice(src, zero, index.shape());
  } else {
    src = cast_to(b, a[3].value(), x.dtype(), index.shape());
  }
  hlo::Builder::ScatterDims dn;
  for (int64_t d = 0; d < x.rank(); ++d) {
    dn.inserted_window_dims.push_back(d);
    dn.scatter_dims_to_operand_dims.push_back(d);
  }
  dn.index_vector_dim = index.rank();
  return {b.scatter(x, coordinates(b, index, dim, x.shape()[dim]), src, dn, combiner(reduce))};
}

TT_RULE({"aten::scatter.src", "aten::scatter.value"},
        [](Builder& b, const Args& a, const Context& c) { return scatter_rule(b, a, c, ""); });
TT_RULE({"aten::scatter.reduce", "aten::scatter.value_reduce"},
        [](Builder& b, const Args& a, const Context& c) { return scatter_rule(b, a, c, a[4].s); });
TT_RULE({"aten::scatter_add"}, [](Builder& b, const Args& a, const Context& c) { return scatter_rule(b, a, c, "add"); });

// index_add(self, dim, index, source, alpha): source slices added at index
// positions along dim (index_select's backward).
TT_RULE({"aten::index_add"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), src = a[3].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (src.type.numel() == 0) return Values{x};
  if (x.rank() == 0) return Values{b.add(x, b.reshape(b.convert(src, x.dtype()), {}))};
  Value v = b.convert(src, x.dtype());
  if (!a[4].is_none()) v = b.mul(v, cast_to(b, a[4].value(), x.dtype(), v.shape()));
  Value idx = b.broadcast_in_dim(b.reshape(a[2].value(), {a[2].value().type.numel()}), v.shape(), {dim});
  hlo::Builder::ScatterDims dn;
  for (int64_t d = 0; d < x.rank(); ++d) {
    dn.inserted_window_dims.push_back(d);
    dn.scatter_dims_to_operand_dims.push_back(d);
  }
  dn.index_vector_dim = v.rank();
  return Values{b.scatter(x, coordinates(b, idx, dim, x.shape()[dim]), v, dn, combiner("add"))};
});

// ---- advanced indexing ------------------------------------------------------------

struct AdvancedIndex {
  std::vector<int64_t> indexed;  // operand dims that carry an index tensor
  Shape batch;                   // broadcast shape of the index tensors
  Value coords;                  // s64 [batch..., indexed.size()]
  bool adjacent = true;          // indexed dims are consecutive
  Shape result;                  // shape of x[indices]
  std::vector<int64_t> window_positions;  // result positions of the non-indexed dims
};

AdvancedIndex advanced_index(Builder& b, Value x, const Values& indices) {
  AdvancedIndex ai;
  std::vector<Shape> shapes;
  Values present;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d].valid()) continue;
    if (indices[d].dtype() == DType::Pred || indices[d].dtype() == DType::U8)
      throw LoweringError("indexing with a boolean mask has a data-dependent shape");
    ai.indexed.push_back(static_cast<int64_t>(d));
    shapes.push_back(indices[d].shape());
    present.push_back(indices[d]);
  }
  if (ai.indexed.empty()) throw LoweringError("index: no index tensors");
  for (size_t k = 1; k < ai.indexed.size(); ++k) ai.adjacent &= ai.indexed[k] == ai.indexed[k - 1] + 1;
  ai.batch = broadcast_shapes(shapes);
  Shape s1 = ai.batch;
  s1.push_back(1);
  Values parts;
  for (size_t k = 0; k < present.size(); ++k) {
    Value i = wrap_index(b, b.broadcast_to(b.convert(present[k], DType::S64), ai.batch), x.shape()[ai.indexed[k]]);
    parts.push_back(b.reshape(i, s1));
  }
  ai.coords = b.concatenate(parts, static_cast<int64_t>(ai.batch.size()));
  // Result layout: PyTorch puts the batch dims where the indexed dims were
  // when they are adjacent, else first.
  int64_t first = ai.adjacent ? ai.indexed.front() : 0;
  int64_t pos = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool is_indexed = std::find(ai.indexed.begin(), ai.indexed.end(), d) != ai.indexed.end();
    if (is_indexed) continue;
    if (pos == first) pos += static_cast<int64_t>(ai.batch.size());
    ai.window_positions.push_back(pos++);
  }
  ai.result.assign(x.rank() - ai.indexed.size() + ai.batch.size(), 0);
  size_t w = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (std::find(ai.indexed.begin(), ai.indexed.end(), d) != ai.indexed.end()) continue;
    ai.result[ai.window_positions[w++]] = x.shape()[d];
  }
  for (size_t k = 0; k < ai.batch.size(); ++k) ai.result[first + k] = ai.batch[k];
  return ai;
}

TT_RULE({"aten::index.Tensor"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  AdvancedIndex ai = advanced_index(b, x, a[1].tensors);
  hlo::Builder::GatherDims dn;
  dn.offset_dims = ai.window_positions;
  dn.collapsed_slice_dims = ai.indexed;
  dn.start_index_map = ai.indexed;
  dn.index_vector_dim = static_cast<int64_t>(ai.batch.size());
  std::vector<int64_t> sizes = x.shape();
  for (auto d : ai.indexed) sizes[d] = 1;
  if (numel(ai.result) == 0) return Values{full(b, 0, x.dtype(), ai.result)};
  return Values{b.gather(x, ai.coords, dn, sizes, ai.result)};
});

// index_put(self, indices, values, accumulate) and _index_put_impl(..., unsafe).
TT_RULE({"aten::index_put", "aten::_index_put_impl"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  AdvancedIndex ai = advanced_index(b, x, a[1].tensors);
  if (numel(ai.result) == 0) return Values{x};
  Value values = b.broadcast_to(b.convert(a[2].value(), x.dtype()), ai.result);
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = ai.window_positions;
  dn.inserted_window_dims = ai.indexed;
  dn.scatter_dims_to_operand_dims = ai.indexed;
  dn.index_vector_dim = static_cast<int64_t>(ai.batch.size());
  bool accumulate = a[3].b;
  // The scatter's update dims must be ordered batch-dims-first when the
  // indexed dims are not adjacent; broadcast_to above already gives ai.result.
  return Values{b.scatter(x, ai.coords, values, dn, accumulate ? combiner("add") : nullptr)};
});

// embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)
TT_RULE({"aten::embedding_dense_backward"}, [](Builder& b, const Args& a, const Context& c) {
  if (a[4].b) throw LoweringError("embedding backward with scale_grad_by_freq is not supported on tpu yet");
  Value g = a[0].value(), idx = a[1].value();
  int64_t n = idx.type.numel(), num = a[2].i, padding = a[3].i;
  int64_t d = g.shape().back();
  DType acc = to_float(g.dtype()) == DType::F32 || g.dtype() == DType::F64 ? g.dtype() : DType::F32;
  if (g.dtype() == DType::BF16 || g.dtype() == DType::F16) acc = DType::F32;
  Value rows = b.convert(b.reshape(g, {n, d}), acc);
  Value flat = b.reshape(b.convert(idx, DType::S64), {n});
  if (padding >= 0) {
    Value is_pad = b.compare(flat, b.constant_int(padding, DType::S64, {n}), hlo::Cmp::EQ);
    rows = b.select(b.broadcast_in_dim(is_pad, {n, d}, {0}), full(b, 0, acc, {n, d}), rows);
  }
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = {1};
  dn.inserted_window_dims = {0};
  dn.scatter_dims_to_operand_dims = {0};
  dn.index_vector_dim = 1;
  Value out = b.scatter(full(b, 0, acc, {num, d}), b.reshape(flat, {n, 1}), rows, dn, combiner("add"));
  return Values{b.convert(out, c.out().dtype)};
});

}  // namespace
}  // namespace tt::lowering
