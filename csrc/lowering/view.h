// Reading and writing PyTorch views inside a program.
//
// A storage is one immutable device buffer (any shape, N elements); a tensor
// is a view of it: sizes, strides and offset in elements. Reading a view and
// writing a new value through it are expressed in StableHLO so that the
// program that uses a view reads it directly, with no copy beforehand.
#pragma once

#include "lowering/rule.h"

namespace tt::lowering {

struct View {
  Shape sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  // PyTorch's lazy math bits (Tensor.is_conj(), is_neg()): the tensor is the
  // conjugate / negation of what its storage holds. read_tensor applies them;
  // write_tensor applies them to the value before storing (both involutions).
  bool conj = false;
  bool neg = false;
  int64_t numel() const;
  bool contiguous() const;  // row-major dense (size-1 dims' strides ignored)
};

// True when the view is the whole storage, densely, from offset 0.
bool covers_storage(const View& v, int64_t storage_numel);

// The view's elements as a value of shape v.sizes. `storage` may have any
// shape; its dtype must equal the tensor's.
Value read_view(Builder& b, Value storage, const View& v);
// A new storage value: `storage` with the view's elements replaced by `value`
// (shape v.sizes, storage's dtype). Result has storage's shape.
Value write_view(Builder& b, Value storage, const View& v, Value value);

// The bytes of `storage` seen as dtype `t`, as PyTorch's untyped storages see
// them (a float tensor's storage read as uint8 by torch.save, and back).
// Same-width types bitcast in place; otherwise the result is flat: f32[n] ->
// u8[4n], u8[4n] -> f32[n] (the byte count must divide). bool is one byte of 0/1.
Value reinterpret_storage(Builder& b, Value storage, DType t);

// A tensor of dtype `t` seen through `v` in `storage` (of any dtype: a view
// of another dtype's bytes reads them reinterpreted), v's math bits applied.
Value read_tensor(Builder& b, Value storage, DType t, const View& v);
// The storage after writing `value` (converted to `t`, broadcast to v.sizes)
// through the view: an in-place op's write-back. It has storage's bytes; its
// dtype is `t` when the view reinterprets the storage (bool aside; flat when
// the widths differ), else storage's dtype and shape.
Value write_tensor(Builder& b, Value storage, DType t, const View& v, Value value);

}  // namespace tt::lowering
