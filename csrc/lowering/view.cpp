#include "lowering/view.h"

#include <algorithm>
#include <numeric>

#include "lowering/helpers.h"

namespace tt::lowering {

int64_t View::numel() const { return lowering::numel(sizes); }

bool View::contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool covers_storage(const View& v, int64_t storage_numel) {
  return v.offset == 0 && v.numel() == storage_numel && v.contiguous();
}

namespace {

// The view with broadcast (stride-0) and size-1 dims removed and the rest
// ordered by decreasing stride: if that is dense, the view is a transpose
// of a contiguous range.
struct Normalized {
  std::vector<int64_t> kept;   // original dims kept, in decreasing-stride order
  Shape kept_sizes;
  bool dense_range = false;    // kept dims form a contiguous range of storage
};

Normalized normalize(const View& v) {
  Normalized n;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] != 1 && v.strides[i] != 0) n.kept.push_back(static_cast<int64_t>(i));
  std::stable_sort(n.kept.begin(), n.kept.end(),
                   [&](int64_t a, int64_t b) { return v.strides[a] > v.strides[b]; });
  int64_t expected = 1;
  bool dense = true;
  for (auto it = n.kept.rbegin(); it != n.kept.rend(); ++it) {
    if (v.strides[*it] != expected) dense = false;
    expected *= v.sizes[*it];
  }
  for (auto d : n.kept) n.kept_sizes.push_back(v.sizes[d]);
  n.dense_range = dense;
  return n;
}

Value flat(Builder& b, Value storage) { return b.reshape(storage, {storage.type.numel()}); }

// Flat storage index of every element of the view, as s64 of shape sizes.
Value element_indices(Builder& b, const View& v) {
  Type it{DType::S64, v.sizes};
  Value idx = b.constant_int(v.offset, DType::S64, v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    Value term = b.mul(b.iota(it, static_cast<int64_t>(d)),
                       b.constant_int(v.strides[d], DType::S64, v.sizes));
    idx = b.add(idx, term);
  }
  return idx;
}

// Inverse of: original dims -> position in `kept` order.
std::vector<int64_t> kept_to_original_perm(const Normalized& n) {
  std::vector<int64_t> order(n.kept.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return n.kept[a] < n.kept[c]; });
  return order;
}

}  // namespace

Value read_view(Builder& b, Value storage, const View& v) {
  const int64_t count = v.numel();
  if (count == 0) return b.constant(0, storage.dtype(), v.sizes);
  if (covers_storage(v, storage.type.numel())) return b.reshape(storage, v.sizes);
  Value f = flat(b, storage);
  Normalized n = normalize(v);
  if (n.dense_range) {
    int64_t kept_numel = numel(n.kept_sizes);
    Value r = b.slice(f, {v.offset}, {v.offset + kept_numel});
    r = b.reshape(r, n.kept_sizes);
    // `r` has the kept dims in decreasing-stride order; bring them back to
    // their original order, then re-insert the size-1 and broadcast dims.
    r = b.transpose(r, kept_to_original_perm(n));
    std::vector<int64_t> sorted_kept = n.kept;
    std::sort(sorted_kept.begin(), sorted_kept.end());
    return b.broadcast_in_dim(r, v.sizes, sorted_kept);
  }
  // General strides: gather every element by its flat index.
  Value idx = element_indices(b, v);
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = static_cast<int64_t>(v.sizes.size());
  return b.gather(f, idx, dn, {1}, v.sizes);
}

Value write_view(Builder& b, Value storage, const View& v, Value value) {
  const Shape storage_shape = storage.shape();
  if (v.numel() == 0) return storage;
  if (covers_storage(v, storage.type.numel())) return b.reshape(value, storage_shape);
  Value f = flat(b, storage);
  Normalized n = normalize(v);
  bool has_broadcast = false;
  for (size_t i = 0; i < v.sizes.size(); ++i) has_broadcast |= v.sizes[i] != 1 && v.strides[i] == 0;
  if (n.dense_range && !has_broadcast) {
    std::vector<int64_t> perm = n.kept;  // value dims in decreasing-stride order
    std::vector<int64_t> sorted_kept = n.kept;
    std::sort(sorted_kept.begin(), sorted_kept.end());
    // Drop size-1 dims, then order the rest by decreasing stride.
    Shape squeezed;
    for (auto d : sorted_kept) squeezed.push_back(v.sizes[d]);
    Value r = b.reshape(value, squeezed);
    std::vector<int64_t> to_kept;
    for (auto d : n.kept)
      to_kept.push_back(std::find(sorted_kept.begin(), sorted_kept.end(), d) - sorted_kept.begin());
    r = b.transpose(r, to_kept);
    r = b.reshape(r, {numel(n.kept_sizes)});
    Value start = b.constant_int(v.offset, DType::S64);
    return b.reshape(b.dynamic_update_slice(f, r, {start}), storage_shape);
  }
  Value idx = element_indices(b, v);
  hlo::Builder::ScatterDims dn;
  dn.inserted_window_dims = {0};
  dn.scatter_dims_to_operand_dims = {0};
  dn.index_vector_dim = static_cast<int64_t>(v.sizes.size());
  return b.reshape(b.scatter(f, idx, value, dn), storage_shape);
}

// XLA has no bitcast to or from complex types: a complex element is its
// real part followed by its imaginary part, so its bytes are read as a
// [n, 2] array of its part type (and assembled back from one).
static Value complex_as_parts(Builder& b, Value storage) {
  Value f = flat(b, storage);
  const int64_t n = f.shape()[0];
  Value parts = b.concatenate({b.reshape(b.real(f), {n, 1}), b.reshape(b.imag(f), {n, 1})}, 1);
  return b.reshape(parts, {2 * n});
}

static Value complex_from_parts(Builder& b, Value parts) {
  const int64_t n = parts.shape()[0] / 2;
  Value pairs = b.reshape(parts, {n, 2});
  Value re = b.reshape(b.slice(pairs, {0, 0}, {n, 1}), {n});
  Value im = b.reshape(b.slice(pairs, {0, 1}, {n, 2}), {n});
  return b.complex(re, im);
}

Value reinterpret_storage(Builder& b, Value storage, DType t) {
  const DType from = storage.dtype();
  if (from == t) return storage;
  if (hlo::is_complex(from)) return reinterpret_storage(b, complex_as_parts(b, storage), t);
  if (hlo::is_complex(t)) {
    Value parts = flat(b, reinterpret_storage(b, storage, hlo::real_dtype(t)));
    if (parts.shape()[0] % 2 != 0)
      throw LoweringError("a storage of " + std::to_string(parts.shape()[0] * hlo::bit_width(parts.dtype()) / 8) +
                          " bytes cannot be read as " + std::to_string(hlo::bit_width(t) / 8) + "-byte elements");
    return complex_from_parts(b, parts);
  }
  if (from == DType::Pred || t == DType::Pred) return b.convert(storage, t);
  const int wf = hlo::bit_width(from), wt = hlo::bit_width(t);
  if (wf == wt) return b.bitcast_convert(storage, t);
  Value f = flat(b, storage);
  const int64_t n = f.shape()[0];
  if (wf > wt) {  // one wide element -> wf / wt narrow ones, in memory order
    const int64_t r = wf / wt;
    return b.reshape(b.emit1("stablehlo.bitcast_convert", {f}, Type{t, {n, r}}), {n * r});
  }
  const int64_t r = wt / wf;
  if (n % r != 0)
    throw LoweringError("a storage of " + std::to_string(n * wf / 8) + " bytes cannot be read as " +
                        std::to_string(wt / 8) + "-byte elements");
  return b.emit1("stablehlo.bitcast_convert", {b.reshape(f, {n / r, r})}, Type{t, {n / r}});
}

// The conjugate bit matters only for complex values (PyTorch never sets it
// on others); the negative bit for any.
static Value apply_math_bits(Builder& b, Value x, const View& v) {
  if (v.conj && hlo::is_complex(x.dtype())) x = b.complex(b.real(x), b.neg(b.imag(x)));
  if (v.neg) x = b.neg(x);
  return x;
}

Value read_tensor(Builder& b, Value storage, DType t, const View& v) {
  return apply_math_bits(b, read_view(b, reinterpret_storage(b, storage, t), v), v);
}

Value write_tensor(Builder& b, Value storage, DType t, const View& v, Value value) {
  Value stored = apply_math_bits(b, b.broadcast_to(b.convert(value, t), v.sizes), v);
  if (t == DType::Pred && storage.dtype() != DType::Pred) {
    // A bool is one byte of 0/1: write those bytes alone, so that bytes the
    // view does not cover keep their values (reading them as bool would
    // turn a 2 into a 1).
    Value bytes = write_view(b, reinterpret_storage(b, storage, DType::U8), v, b.convert(stored, DType::U8));
    return b.reshape(reinterpret_storage(b, bytes, storage.dtype()), storage.shape());
  }
  Value written = write_view(b, reinterpret_storage(b, storage, t), v, stored);
  // Bytes written through a view of another width stay in the view's dtype:
  // the next write through such a view (a KV cache carved out of one byte
  // buffer) then updates the storage in place instead of converting every
  // byte of it twice. A bool storage keeps its dtype: bool is a value
  // conversion, not a bitcast.
  if (t != storage.dtype() && storage.dtype() != DType::Pred) return written;
  return b.reshape(reinterpret_storage(b, written, storage.dtype()), storage.shape());
}

}  // namespace tt::lowering
