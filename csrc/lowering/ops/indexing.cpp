// Indexing: index_select, embedding, gather, scatter / scatter_add / scatter_reduce,
// index_add / index_copy / index_fill, take / put, advanced indexing
// (index.Tensor) and index_put, masked_scatter, nonzero_static (nonzero with
// a fixed result size), embedding's backward. Negative indices are
// wrapped as PyTorch does; out-of-range indices are not checked on the device
// (StableHLO gather clamps and scatter drops them).
#include <algorithm>

#include "lowering/device_check.h"
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

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
  Value idx = a[2].value();
  // PyTorch's meta kernel does not check the index; its CPU kernel does.
  if (idx.rank() > 1) throw std::out_of_range("index_select(): Index is supposed to be a vector");
  if (idx.dtype() != DType::S64 && idx.dtype() != DType::S32)
    throw std::runtime_error("index_select(): Expected dtype int32 or int64 for index");
  if (x.rank() == 0) return Values{b.reshape(x, c.out().shape)};
  int64_t n = idx.type.numel();
  // The CPU kernel's own path for dim 1 words the error differently.
  if (dim == 1)
    check_index_range(b, c, idx, 0, x.shape()[dim], CheckError::Runtime,
                      "INDICES element is out of DATA bounds, id={} axis_dim=" + std::to_string(x.shape()[dim]));
  else
    check_index_range(b, c, idx, 0, x.shape()[dim], CheckError::Index, "index out of range in self");
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
TT_PADDING({"aten::index_select"}, Padding::fill({}));

// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): the
// rows of weight at indices, shaped indices.shape + [embedding_dim].
TT_RULE({"aten::embedding"}, [](Builder& b, const Args& a, const Context& c) {
  Value w = a[0].value(), idx = a[1].value();
  if (w.rank() != 2) throw LoweringError("embedding: weight must be 2-D");
  int64_t n = idx.type.numel();
  if (n == 0) return Values{full(b, 0, w.dtype(), c.out().shape)};
  check_index_range(b, c, idx, 0, w.shape()[0], CheckError::Index, "index out of range in self");
  Value rows = b.reshape(wrap_index(b, idx, w.shape()[0]), {n, 1});
  hlo::Builder::GatherDims dn;
  dn.offset_dims = {1};
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  return Values{b.reshape(b.gather(w, rows, dn, {1, w.shape()[1]}, {n, w.shape()[1]}), c.out().shape)};
});
TT_PADDING({"aten::embedding"}, Padding::fill({}));

TT_RULE({"aten::gather"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), index = a[2].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (index.type.numel() == 0) return Values{full(b, 0, c.out().dtype, c.out().shape)};
  if (x.rank() == 0) return Values{b.broadcast_in_dim(x, c.out().shape, {})};  // index must be 0
  check_index_range(b, c, index, 0, x.shape()[dim], CheckError::Runtime,
                    "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                        std::to_string(x.shape()[dim]));
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
  check_index_range(b, c, index, 0, x.shape()[dim], CheckError::Runtime,
                    "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                        std::to_string(x.shape()[dim]));
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
  Value v = b.convert(src, x.dtype());
  if (!a[4].is_none()) v = b.mul(v, cast_to(b, a[4].value(), x.dtype(), v.shape()));
  if (x.rank() == 0) return Values{b.add(x, b.reshape(v, {}))};
  check_index_range(b, c, a[2].value(), 0, x.shape()[dim], CheckError::Runtime,
                    "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                        std::to_string(x.shape()[dim]));
  Value idx = b.broadcast_in_dim(b.reshape(a[2].value(), {a[2].value().type.numel()}), v.shape(), {dim});
  hlo::Builder::ScatterDims dn;
  for (int64_t d = 0; d < x.rank(); ++d) {
    dn.inserted_window_dims.push_back(d);
    dn.scatter_dims_to_operand_dims.push_back(d);
  }
  dn.index_vector_dim = v.rank();
  return Values{b.scatter(x, coordinates(b, idx, dim, x.shape()[dim]), v, dn, combiner("add"))};
});
TT_PADDING({"aten::index_add"}, Padding::fill({{"source", 0}}));

// Scatters `updates` (shaped like `index`) into `base` along `dim` with `combine`.
Value scatter_along(Builder& b, Value base, Value index, int64_t dim, Value updates, const hlo::Body& combine) {
  hlo::Builder::ScatterDims dn;
  for (int64_t d = 0; d < base.rank(); ++d) {
    dn.inserted_window_dims.push_back(d);
    dn.scatter_dims_to_operand_dims.push_back(d);
  }
  dn.index_vector_dim = index.rank();
  return b.scatter(base, coordinates(b, index, dim, base.shape()[dim]), updates, dn, combine);
}

// Reduces `src` (shaped like `index`) into x along dim: sum, prod, mean,
// amax, amin; without include_self the positions that receive values start
// from the reduction's identity. scatter_reduce and index_reduce.
Value reduce_into(Builder& b, Value x, int64_t dim, Value index, Value src, const std::string& reduce,
                  bool include_self) {
  DType t = x.dtype();
  const Shape& is = index.shape();
  // Positions that receive at least one value, and how many.
  DType ct = hlo::is_float(t) ? t : DType::S64;
  Value counts = scatter_along(b, full(b, 0, ct, x.shape()), index, dim, full(b, 1, ct, is), combiner("add"));
  Value touched = b.compare(counts, full(b, 0, ct, x.shape()), hlo::Cmp::GT);
  std::string op = reduce == "sum" || reduce == "mean" ? "add" : reduce == "prod" ? "multiply" : reduce;
  Value start = x;
  if (!include_self) {
    Value id = reduce == "amax" ? b.broadcast_in_dim(extreme_identity(b, t, true), x.shape(), {})
               : reduce == "amin" ? b.broadcast_in_dim(extreme_identity(b, t, false), x.shape(), {})
                                  : full(b, reduce == "prod" ? 1 : 0, t, x.shape());
    if (t == DType::Pred) id = full(b, reduce == "prod" || reduce == "amin" ? 1 : 0, t, x.shape());
    start = b.select(touched, id, x);
  }
  Value r = scatter_along(b, start, index, dim, src, combiner(op));
  if (reduce == "mean") {
    Value n = include_self ? b.add(counts, full(b, 1, ct, x.shape())) : b.max(counts, full(b, 1, ct, x.shape()));
    if (hlo::is_float(t)) {
      r = b.div(r, n);
    } else {
      // Integer means round toward -inf, as on the CPU.
      Value rc = b.convert(r, DType::S64);
      Value q = b.div(rc, n);
      Value fix = b.and_(b.compare(b.mul(q, n), rc, hlo::Cmp::NE),
                         b.compare(rc, full(b, 0, DType::S64, x.shape()), hlo::Cmp::LT));
      r = b.convert(b.select(fix, b.sub(q, full(b, 1, DType::S64, x.shape())), q), t);
    }
  }
  return r;
}

// scatter_reduce.two(self, dim, index, src, reduce, include_self).
TT_RULE({"aten::scatter_reduce.two"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), index = a[2].value();
  // The CPU also accepts "max" / "min" for amax / amin.
  const std::string reduce = a[4].s == "max" ? "amax" : a[4].s == "min" ? "amin" : a[4].s;
  if (reduce != "sum" && reduce != "prod" && reduce != "mean" && reduce != "amax" && reduce != "amin")
    throw std::runtime_error("reduce argument must be either sum, prod, mean, amax or amin, got " + reduce);
  if (index.type.numel() == 0) return Values{x};
  if (x.rank() == 0) throw LoweringError("scatter_reduce of a 0-d tensor");
  int64_t dim = wrap_dim(a[1].i, x.rank());
  Value src = b.convert(a[3].value(), x.dtype());
  src = b.slice(src, std::vector<int64_t>(src.rank(), 0), index.shape());
  check_index_range(b, c, index, 0, x.shape()[dim], CheckError::Runtime,
                    "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                        std::to_string(x.shape()[dim]));
  return Values{reduce_into(b, x, dim, index, src, reduce, a[5].b)};
});

// index_reduce(self, dim, index, source, reduce, include_self): source slices
// reduced into self at index positions along dim (prod, mean, amax, amin).
TT_RULE({"aten::index_reduce"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), src = a[3].value();
  const std::string& reduce = a[4].s;
  if (reduce != "prod" && reduce != "mean" && reduce != "amax" && reduce != "amin")
    throw InvalidArgument("index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got " + reduce + ".");
  if (src.type.numel() == 0) return Values{x};
  Value v = b.convert(src, x.dtype());
  if (x.rank() == 0) {
    x = b.reshape(x, {1});
    v = b.reshape(v, {1});
  }
  int64_t dim = wrap_dim(a[1].i, x.rank());
  check_index_range(b, c, a[2].value(), 0, x.shape()[dim], CheckError::Index, "index out of range in self");
  Value idx = b.broadcast_in_dim(b.reshape(a[2].value(), {a[2].value().type.numel()}), v.shape(), {dim});
  Value r = reduce_into(b, x, dim, idx, v, reduce, a[5].b);
  return Values{b.reshape(r, c.out().shape)};
});

// index_copy(self, dim, index, source): source slices written at index
// positions along dim.
TT_RULE({"aten::index_copy"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), src = a[3].value();
  if (src.type.numel() == 0) return Values{x};
  if (x.rank() == 0) return Values{b.reshape(b.convert(src, x.dtype()), {})};
  int64_t dim = wrap_dim(a[1].i, x.rank());
  Value v = b.convert(src, x.dtype());
  if (v.rank() == 0) v = b.reshape(v, {1});
  check_index_range(b, c, a[2].value(), 0, x.shape()[dim], CheckError::Index,
                    "index_copy_(): index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                        std::to_string(x.shape()[dim]));
  Value idx = b.broadcast_in_dim(b.reshape(a[2].value(), {a[2].value().type.numel()}), v.shape(), {dim});
  return Values{scatter_along(b, x, idx, dim, v, nullptr)};
});

// index_fill.int_Scalar / int_Tensor(self, dim, index, value): value at the
// index positions along dim.
TT_RULE({"aten::index_fill.int_Scalar", "aten::index_fill.int_Tensor"},
        [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), index = a[2].value();
  int64_t m = index.type.numel();
  if (m == 0) return Values{x};
  if (a[3].is_tensor() && a[3].value().rank() != 0)
    throw std::runtime_error("index_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
                             std::to_string(a[3].value().rank()) + " dimension(s).");
  Value v = b.broadcast_in_dim(b.convert(a[3].value(), x.dtype()), x.shape(), {});
  if (x.rank() == 0) return Values{v};
  int64_t dim = wrap_dim(a[1].i, x.rank()), n = x.shape()[dim];
  check_index_range(b, c, index, -n, n, CheckError::Index,
                    "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                        std::to_string(x.shape()[dim]));
  Value iv = b.reshape(wrap_index(b, index, n), {m});
  Type pair{DType::S64, {n, m}};
  Value hit = b.compare(b.iota(pair, 0), b.broadcast_in_dim(iv, {n, m}, {1}), hlo::Cmp::EQ);
  Value any = b.reduce(hit, b.constant(0, DType::Pred), {1}, "stablehlo.or");
  return Values{b.select(b.broadcast_in_dim(any, x.shape(), {dim}), v, x)};
});

// take(self, index): self flattened, gathered at index (shaped like index).
TT_RULE({"aten::take"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), index = a[1].value();
  int64_t n = x.type.numel(), m = index.type.numel();
  if (m == 0) return Values{full(b, 0, x.dtype(), index.shape())};
  if (n == 0) throw std::out_of_range("take(): tried to take from an empty tensor");
  Value flat = b.reshape(x, {n});
  check_index_range(b, c, index, -n, n, CheckError::Index,
                    "out of range: tried to access index {} on a tensor of " + std::to_string(n) + " elements.");
  Value idx = b.reshape(wrap_index(b, index, n), {m, 1});
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  return Values{b.reshape(b.gather(flat, idx, dn, {1}, {m}), index.shape())};
});

// put(self, index, source, accumulate): source written (or added) at the
// flattened positions index.
TT_RULE({"aten::put"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), index = a[1].value();
  int64_t n = x.type.numel(), m = index.type.numel();
  if (m == 0) return Values{x};
  if (a[2].value().type.numel() != m)
    throw std::out_of_range("put_(): Expected source and index to have the same number of elements, but got "
                             "source.numel() = " + std::to_string(a[2].value().type.numel()) +
                             ", index.numel() = " + std::to_string(m));
  if (n == 0) throw std::out_of_range("put_(): Tried to put elements into an empty tensor");
  Value src = b.reshape(b.convert(a[2].value(), x.dtype()), {m});
  check_index_range(b, c, index, -n, n, CheckError::Index,
                    "out of range: tried to access index {} on a tensor of " + std::to_string(n) + " elements.");
  Value idx = b.reshape(wrap_index(b, index, n), {m});
  Value r = scatter_along(b, b.reshape(x, {n}), idx, 0, src, a[3].b ? combiner("add") : nullptr);
  return Values{b.reshape(r, x.shape())};
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

// Indices out of range raise as the CPU's (it numbers the dimension among
// the indexed ones).
AdvancedIndex advanced_index(Builder& b, const Context& c, Value x, const Values& indices) {
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
    int64_t size = x.shape()[ai.indexed[k]];
    check_index_range(b, c, present[k], -size, size, CheckError::Index,
                      "index {} is out of bounds for dimension " + std::to_string(k) + " with size " +
                          std::to_string(size));
    Value i = wrap_index(b, b.broadcast_to(b.convert(present[k], DType::S64), ai.batch), size);
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
  AdvancedIndex ai = advanced_index(b, c, x, a[1].tensors);
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
TT_PADDING({"aten::index.Tensor"}, Padding::fill({}));

// A lone boolean mask over the leading dims (x[mask] = v): the mask, else an
// invalid Value.
Value single_mask(const Values& indices) {
  if (indices.size() != 1 || !indices[0].valid()) return Value{};
  DType t = indices[0].dtype();
  return t == DType::Pred || t == DType::U8 ? indices[0] : Value{};
}

std::vector<int64_t> iota_dims(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// Whether the values of x[mask] = values are the same whatever the number
// of selected positions: they broadcast to x's non-mask dims, with any extra
// leading dim of size 1.
bool mask_value_fits(Value values, Value x, Value m) {
  if (m.rank() > x.rank()) return false;
  Shape rest(x.shape().begin() + m.rank(), x.shape().end());
  const Shape& vs = values.shape();
  size_t extra = vs.size() > rest.size() ? vs.size() - rest.size() : 0;
  for (size_t i = 0; i < extra; ++i)
    if (vs[i] != 1) return false;
  Shape tail(vs.begin() + extra, vs.end());
  try {
    return broadcast_shapes({tail, rest}) == rest;
  } catch (const LoweringError&) {
    return false;
  }
}

// index_put(self, indices, values, accumulate) and _index_put_impl(..., unsafe).
TT_RULE({"aten::index_put", "aten::_index_put_impl"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  bool accumulate = a[3].b;
  if (Value m = single_mask(a[1].tensors); m.valid() && mask_value_fits(a[2].value(), x, m)) {
    // x[mask] = v with v the same for every selected position: a select, no
    // data-dependent shape.
    for (int64_t d = 0; d < m.rank(); ++d)
      if (d >= x.rank() || m.shape()[d] != x.shape()[d])
        throw std::out_of_range("The shape of the mask " + hlo::i64_list(m.shape()) + " at index " +
                                std::to_string(d) + " does not match the shape of the indexed tensor " +
                                hlo::i64_list(x.shape()) + " at index " + std::to_string(d));
    Value mask = b.broadcast_in_dim(b.compare(m, b.constant_int(0, m.dtype(), m.shape()), hlo::Cmp::NE),
                                    x.shape(), iota_dims(m.rank()));
    Value v = b.convert(a[2].value(), x.dtype());
    Shape rest(x.shape().begin() + m.rank(), x.shape().end());
    // Drop the values' leading dims (all 1 by mask_value_fits), align the
    // rest with x's non-mask dims.
    while (v.rank() > static_cast<int64_t>(rest.size())) {
      Shape s2(v.shape().begin() + 1, v.shape().end());
      v = b.reshape(v, s2);
    }
    v = b.broadcast_to(v, x.shape());
    if (accumulate) v = x.dtype() == DType::Pred ? b.or_(x, v) : b.add(x, v);
    return Values{b.select(mask, v, x)};
  }
  AdvancedIndex ai = advanced_index(b, c, x, a[1].tensors);
  if (numel(ai.result) == 0) return Values{x};
  Value given = a[2].value();
  bool fits = false;
  try {
    fits = broadcast_shapes({given.shape(), ai.result}) == ai.result;
  } catch (const LoweringError&) {
  }
  if (!fits) {
    throw std::runtime_error("shape mismatch: value tensor of shape " + hlo::i64_list(given.shape()) +
                             " cannot be broadcast to indexing result of shape " + hlo::i64_list(ai.result));
  }
  Value values = b.broadcast_to(b.convert(given, x.dtype()), ai.result);
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = ai.window_positions;
  dn.inserted_window_dims = ai.indexed;
  dn.scatter_dims_to_operand_dims = ai.indexed;
  dn.index_vector_dim = static_cast<int64_t>(ai.batch.size());
  // The scatter's update dims must be ordered batch-dims-first when the
  // indexed dims are not adjacent; broadcast_to above already gives ai.result.
  return Values{b.scatter(x, ai.coords, values, dn, accumulate ? combiner("add") : nullptr)};
});

// Inclusive prefix sum along a 1-D value (a reduce_window).
Value prefix_sum(Builder& b, Value x) {
  int64_t n = x.shape()[0];
  return b.reduce_window({x}, {b.constant(0, x.dtype())}, {n}, {1}, {1}, {1}, {{n - 1, 0}},
                         [](Builder& b, const Values& v) { return Values{b.add(v[0], v[1])}; })[0];
}

// masked_scatter(self, mask, source): the k-th True position (in row-major
// order) takes source's k-th element.
TT_RULE({"aten::masked_scatter"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  int64_t n = numel(out.shape);
  Value self = cast_to(b, a[0].value(), out.dtype, out.shape);
  if (n == 0) return Values{self};
  Value mask = b.reshape(cast_to(b, a[1].value(), DType::Pred, out.shape), {n});
  Value src = b.convert(a[2].value(), out.dtype);
  int64_t m = numel(src.shape());
  if (m == 0) return Values{self};
  src = b.reshape(src, {m});
  Value k = b.sub(prefix_sum(b, b.convert(mask, DType::S64)), b.constant_int(1, DType::S64, {n}));
  k = b.clamp(b.constant_int(0, DType::S64, {n}), k, b.constant_int(m - 1, DType::S64, {n}));
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  Value taken = b.gather(src, b.reshape(k, {n, 1}), dn, {1}, {n});
  return Values{b.reshape(b.select(mask, taken, b.reshape(self, {n})), out.shape)};
});

// nonzero_static(self, size, fill_value) -> [size, ndim] int64: the first
// `size` non-zero positions in row-major order (a stable sort of the flat
// indices by "is zero"), rows past the count filled with fill_value.
TT_RULE({"aten::nonzero_static"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = a[0].value();
  int64_t size = a[1].i, fill = a[2].i, rank = x.rank();
  if (size < 0) throw InvalidArgument("nonzero_static: 'size' must be an non-negative integer");
  int64_t n = numel(x.shape());
  // A 0-d input has no coordinates: [size, 0].
  if (rank == 0 || size == 0 || n == 0) return Values{b.constant_int(fill, DType::S64, out.shape)};
  Value flat = b.reshape(x, {n});
  Value zero = x.dtype() == DType::Pred ? b.constant_int(0, DType::Pred, {n}) : b.constant(0, x.dtype(), {n});
  Value is_zero = b.convert(b.compare(flat, zero, Cmp::EQ), DType::S32);
  Value pos = b.iota(Type{DType::S64, {n}}, 0);
  Values sorted = b.sort({is_zero, pos}, 0, /*stable=*/true, [](Builder& b, const Values& v) {
    return Values{b.compare(v[0], v[1], Cmp::LT)};
  });
  Value count = reduce_sum(b, b.convert(b.sub(b.constant_int(1, DType::S32, {n}), is_zero), DType::S64), {0});
  Value idx = sorted[1];
  if (size < n) idx = b.slice(idx, {0}, {size});
  if (size > n) idx = b.pad(idx, b.constant_int(0, DType::S64), {0}, {size - n}, {0});
  // Unravel each flat index into coordinates, last dim fastest.
  Values coords(rank);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    Value q = b.div(idx, b.constant_int(stride, DType::S64, {size}));
    coords[d] = b.reshape(b.binary("stablehlo.remainder", q, b.constant_int(x.shape()[d], DType::S64, {size})),
                          {size, 1});
    stride *= x.shape()[d];
  }
  Value r = rank == 1 ? coords[0] : b.concatenate(coords, 1);
  Value row = b.iota(Type{DType::S64, {size, rank}}, 0);
  Value valid = b.compare(row, b.broadcast_in_dim(count, {size, rank}, {}), Cmp::LT);
  return Values{b.select(valid, r, b.constant_int(fill, DType::S64, {size, rank}))};
});

// embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)
TT_RULE({"aten::embedding_dense_backward"}, [](Builder& b, const Args& a, const Context& c) {
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
  if (n == 0) return Values{full(b, 0, c.out().dtype, c.out().shape)};
  Value coords = b.reshape(flat, {n, 1});
  Value out = b.scatter(full(b, 0, acc, {num, d}), coords, rows, dn, combiner("add"));
  if (a[4].b) {
    // scale_grad_by_freq: each row's sum divided by how often its index occurs.
    hlo::Builder::ScatterDims cn;
    cn.inserted_window_dims = {0};
    cn.scatter_dims_to_operand_dims = {0};
    cn.index_vector_dim = 1;
    Value counts = b.scatter(full(b, 0, acc, {num}), coords, full(b, 1, acc, {n}), cn, combiner("add"));
    counts = b.max(counts, full(b, 1, acc, {num}));
    out = b.div(out, b.broadcast_in_dim(counts, {num, d}, {0}));
  }
  return Values{b.convert(out, c.out().dtype)};
});
TT_PADDING({"aten::embedding_dense_backward"}, Padding::fill({{"grad_output", 0}}));

}  // namespace
}  // namespace tt::lowering
