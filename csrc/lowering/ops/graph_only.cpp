// Rules used only when a whole graph becomes one program (torch.compile,
// fused eager). In eager mode these ops never run a program: views alias
// their base's storage, and factories are empty + fill_. Inside a graph every
// value is a logical row-major array, so a view is a reshape, transpose or
// slice of its input, and a factory is a constant.
#include "lowering/device_check.h"
#include "lowering/helpers.h"
#include "lowering/view.h"

namespace tt::lowering {
namespace {

// view, squeeze, unsqueeze, alias and friends: the same elements in
// row-major order under a new shape.
TT_GRAPH_RULE({"aten::view", "aten::_unsafe_view", "aten::view_copy", "aten::_reshape_alias",
               "aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims", "aten::unsqueeze", "aten::alias",
               "aten::detach", "aten::lift_fresh_copy", "aten::lift_fresh", "aten::lift", "aten::contiguous",
               "aten::squeeze_copy", "aten::unsqueeze_copy", "aten::alias_copy",
               "aten::detach_copy"},
              [](Builder& b, const Args& a, const Context& c) {
                return Values{b.reshape(a[0].value(), c.out().shape)};
              });
TT_PADDING({"aten::view", "aten::_unsafe_view", "aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims",
            "aten::unsqueeze", "aten::alias", "aten::detach", "aten::lift_fresh_copy"},
           Padding::view());

// Tensor.view(dtype): the same bytes in row-major order read as another
// dtype; the last dimension scales by the ratio of the widths.
TT_GRAPH_RULE({"aten::view.dtype", "aten::view_copy.dtype"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  Value flat = b.reshape(x, {x.type.numel()});
  return Values{b.reshape(reinterpret_storage(b, flat, c.out().dtype), c.out().shape)};
});

TT_GRAPH_RULE({"aten::expand", "aten::expand_copy"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{b.broadcast_to(a[0].value(), c.out().shape)};
});
TT_PADDING({"aten::expand"}, Padding::view());

TT_GRAPH_RULE({"aten::permute", "aten::permute_copy"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  return Values{b.transpose(x, wrap_dims(a[1].ints, x.rank()))};
});
TT_PADDING({"aten::permute"}, Padding::view());

TT_GRAPH_RULE({"aten::t", "aten::t_copy"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  return Values{x.rank() < 2 ? x : b.transpose(x, {1, 0})};
});
TT_PADDING({"aten::t"}, Padding::view());

TT_GRAPH_RULE({"aten::transpose.int", "aten::transpose_copy.int"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  if (x.rank() == 0) return Values{x};
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[wrap_dim(a[1].i, x.rank())], perm[wrap_dim(a[2].i, x.rank())]);
  return Values{b.transpose(x, perm)};
});
TT_PADDING({"aten::transpose.int"}, Padding::view());

// PyTorch's slice bounds: None is the end, negatives count from the end, and
// both clamp to [0, size] with end >= start.
std::pair<int64_t, int64_t> slice_bounds(const Arg& start, const Arg& end, int64_t size) {
  int64_t s = start.is_none() ? 0 : start.i, e = end.is_none() ? size : end.i;
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  return {s, e};
}

Value slice_dim(Builder& b, Value x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  std::vector<int64_t> lo(x.rank(), 0), hi = x.shape(), st(x.rank(), 1);
  lo[dim] = start;
  hi[dim] = end;
  st[dim] = step;
  return b.slice(x, lo, hi, st);
}

// slice.Tensor(self, dim, start, end, step)
TT_GRAPH_RULE({"aten::slice.Tensor", "aten::slice_copy.Tensor"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  auto [s, e] = slice_bounds(a[2], a[3], x.shape()[dim]);
  return Values{slice_dim(b, x, dim, s, e, a[4].i)};
});
TT_PADDING({"aten::slice.Tensor"}, Padding::view());

// select.int(self, dim, index)
TT_GRAPH_RULE({"aten::select.int", "aten::select_copy.int"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  int64_t i = a[2].i < 0 ? a[2].i + x.shape()[dim] : a[2].i;
  if (i < 0 || i >= x.shape()[dim]) throw LoweringError("select: index out of range");
  return Values{b.reshape(slice_dim(b, x, dim, i, i + 1, 1), c.out().shape)};
});
TT_PADDING({"aten::select.int"}, Padding::view());

// split.Tensor(self, split_size, dim), split_with_sizes(self, sizes, dim)
// and unbind.int(self, dim): consecutive slices along dim, sized by the
// result types.
TT_GRAPH_RULE({"aten::split.Tensor", "aten::split_with_sizes", "aten::unbind.int", "aten::split_copy.Tensor",
               "aten::split_with_sizes_copy", "aten::unbind_copy.int"},
              [](Builder& b, const Args& a, const Context& c) {
                Value x = a[0].value();
                const Arg& dim_arg = c.op.find("unbind") != std::string::npos ? a[1] : a[2];
                int64_t dim = wrap_dim(dim_arg.i, x.rank());
                bool squeeze = c.op.find("unbind") != std::string::npos;
                Values out;
                int64_t at = 0;
                for (const Type& t : c.out_types) {
                  int64_t len = squeeze ? 1 : t.shape[dim];
                  out.push_back(b.reshape(slice_dim(b, x, dim, at, at + len, 1), t.shape));
                  at += len;
                }
                return out;
              });
TT_PADDING({"aten::split.Tensor", "aten::split_with_sizes", "aten::unbind.int"}, Padding::view());

// The permutation that moves dims d1 and d2 last, the others kept in order.
std::vector<int64_t> diagonal_last_perm(int64_t rank, int64_t d1, int64_t d2) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    if (i != d1 && i != d2) perm.push_back(i);
  perm.push_back(d1);
  perm.push_back(d2);
  return perm;
}

// diagonal(self, offset, dim1, dim2): a gather of the (i, i + offset) pairs,
// moved to the last dim as PyTorch does.
TT_GRAPH_RULE({"aten::diagonal", "aten::diagonal_copy"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t off = a[1].i, d1 = wrap_dim(a[2].i, x.rank()), d2 = wrap_dim(a[3].i, x.rank());
  Value t = b.transpose(x, diagonal_last_perm(x.rank(), d1, d2));
  int64_t r = t.rank();
  int64_t len = c.out().shape.back();
  if (len == 0) return Values{full(b, 0, c.out().dtype, c.out().shape)};
  // Row i of the diagonal is element (i + max(-off, 0), i + max(off, 0)).
  int64_t r0 = std::max<int64_t>(-off, 0), c0 = std::max<int64_t>(off, 0);
  Value rows = slice_dim(b, t, r - 2, r0, r0 + len, 1);
  Value sq = slice_dim(b, rows, r - 1, c0, c0 + len, 1);  // [..., len, len]
  Shape sqs = sq.shape();
  Value eye = b.compare(b.iota(Type{DType::S64, sqs}, r - 2), b.iota(Type{DType::S64, sqs}, r - 1), hlo::Cmp::EQ);
  Value zero = full(b, 0, x.dtype(), sqs);
  Value picked = b.select(eye, sq, zero);
  Value summed = x.dtype() == DType::Pred
                     ? b.reduce(picked, b.constant_int(0, DType::Pred), {r - 1}, "stablehlo.or")
                     : reduce_sum(b, picked, {r - 1});
  return Values{b.reshape(summed, c.out().shape)};
});

// ---- scatters of views (functionalized in-place writes to a view) -------------

// slice_scatter(self, src, dim, start, end, step): src's elements go to the
// sliced positions; interior padding spaces them `step` apart.
TT_GRAPH_RULE({"aten::slice_scatter"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), src = b.convert(a[1].value(), c.out().dtype);
  int64_t dim = wrap_dim(a[2].i, x.rank());
  auto [s, e] = slice_bounds(a[3], a[4], x.shape()[dim]);
  int64_t step = a[5].i, n = src.shape()[dim];
  if (n == 0) return Values{x};
  std::vector<int64_t> lo(x.rank(), 0), hi(x.rank(), 0), interior(x.rank(), 0);
  lo[dim] = s;
  interior[dim] = step - 1;
  hi[dim] = x.shape()[dim] - (s + (n - 1) * step + 1);
  (void)e;
  Value placed = b.pad(src, b.constant(0, src.dtype()), lo, hi, interior);
  Value ones = full(b, 1, DType::Pred, src.shape());
  Value mask = b.pad(ones, b.constant_int(0, DType::Pred), lo, hi, interior);
  return Values{b.select(mask, placed, x)};
});

// select_scatter(self, src, dim, index)
TT_GRAPH_RULE({"aten::select_scatter"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[2].i, x.rank());
  int64_t i = a[3].i < 0 ? a[3].i + x.shape()[dim] : a[3].i;
  Shape s = x.shape();
  s[dim] = 1;
  Value src = b.reshape(b.convert(a[1].value(), c.out().dtype), s);
  Values starts;
  for (int64_t d = 0; d < x.rank(); ++d) starts.push_back(b.constant_int(d == dim ? i : 0, DType::S64));
  return Values{b.dynamic_update_slice(x, src, starts)};
});

// diagonal_scatter(self, src, offset, dim1, dim2): src's last dim runs along
// the (i, i + offset) diagonal of (dim1, dim2), its other dims are self's
// others in order (the layout diagonal() returns).
TT_GRAPH_RULE({"aten::diagonal_scatter"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), src = b.convert(a[1].value(), c.out().dtype);
  int64_t off = a[2].i, d1 = wrap_dim(a[3].i, x.rank()), d2 = wrap_dim(a[4].i, x.rank());
  int64_t len = src.shape().back();
  if (len == 0) return Values{x};
  const std::vector<int64_t> perm = diagonal_last_perm(x.rank(), d1, d2);
  Value t = b.transpose(x, perm);
  Shape ts = t.shape();
  int64_t r = t.rank(), r0 = std::max<int64_t>(-off, 0);
  // src[..., k] belongs to row r0 + k: pad the diagonal dim out to the rows,
  // then repeat it along the columns and keep it where column = row + offset.
  std::vector<int64_t> lo(src.rank(), 0), hi(src.rank(), 0), interior(src.rank(), 0);
  lo.back() = r0;
  hi.back() = ts[r - 2] - r0 - len;
  Value by_row = b.pad(src, b.constant(0, src.dtype()), lo, hi, interior);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < r - 1; ++i) dims.push_back(i);
  Value spread = b.broadcast_in_dim(by_row, ts, dims);
  Type idx{DType::S64, ts};
  Value on_diag = b.compare(b.add(b.iota(idx, r - 2), b.constant_int(off, DType::S64, ts)), b.iota(idx, r - 1),
                            hlo::Cmp::EQ);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return Values{b.transpose(b.select(on_diag, spread, t), inverse)};
});

// ---- factories: constants of the result type ------------------------------------

TT_GRAPH_RULE({"aten::empty.memory_format", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
               "aten::new_empty_strided", "aten::zeros", "aten::zeros_like", "aten::new_zeros"},
              [](Builder& b, const Args&, const Context& c) {
                // Uninitialised memory may hold anything; zeros are a valid choice.
                return Values{full(b, 0, c.out().dtype, c.out().shape)};
              });
TT_PADDING({"aten::empty_like", "aten::zeros_like"}, Padding::elementwise());
TT_PADDING({"aten::empty.memory_format", "aten::empty_strided", "aten::new_empty", "aten::zeros", "aten::new_zeros"},
           Padding::creation());

TT_GRAPH_RULE({"aten::ones", "aten::ones_like", "aten::new_ones"}, [](Builder& b, const Args&, const Context& c) {
  return Values{full(b, 1, c.out().dtype, c.out().shape)};
});
TT_PADDING({"aten::ones_like"}, Padding::elementwise());
TT_PADDING({"aten::ones", "aten::new_ones"}, Padding::creation());

// full(size, fill_value), full_like(self, fill_value), new_full(self, size,
// fill_value), scalar_tensor(s): the Scalar converted and broadcast.
TT_GRAPH_RULE({"aten::full", "aten::full_like", "aten::new_full", "aten::scalar_tensor"},
              [](Builder& b, const Args& a, const Context& c) {
                size_t k = c.op == "aten::full" || c.op == "aten::full_like" ? 1 : c.op == "aten::new_full" ? 2 : 0;
                return Values{cast_to(b, a[k].value(), c.out().dtype, c.out().shape)};
              });
TT_PADDING({"aten::full_like"}, Padding::elementwise());
TT_PADDING({"aten::full", "aten::new_full", "aten::scalar_tensor"}, Padding::creation());

// _to_copy(self, dtype, ...): a conversion (the caller keeps device moves
// out of graphs).
TT_GRAPH_RULE({"aten::_to_copy", "prims::convert_element_type"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{convert_dtype(b, a[0].value(), c.out().dtype)};
});
TT_PADDING({"aten::_to_copy"}, Padding::elementwise());

// ---- prims that Dynamo itself emits ----------------------------------------------

// prims::div(a, b): true division for floats, division rounding toward zero
// for integers (stablehlo.divide's integer semantics, as C and prims define
// it), as PyTorch's decompositions emit it (lcm's, for one).
TT_GRAPH_RULE({"prims::div"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape), y = cast_to(b, a[1].value(), ct, out.shape);
  return Values{b.convert(b.div(x, y), out.dtype)};
});

// prims::fma(a, b, c) = a * b + c, rounded once (half types compute in f32):
// what Dynamo makes of addcmul_ / addcdiv_ with a value and add_ with a
// tensor alpha.
TT_GRAPH_RULE({"prims::fma"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape), y = cast_to(b, a[1].value(), ct, out.shape);
  Value z = cast_to(b, a[2].value(), ct, out.shape);
  return Values{b.convert(b.add(b.mul(x, y), z), out.dtype)};
});

// ---- ops whose eager form is the *_overrideable op -----------------------------

TT_GRAPH_RULE({"aten::convolution"}, [](Builder& b, const Args& a, const Context& c) {
  return find_rule("aten::convolution_overrideable")->fn(b, a, c);
});

// convolution_backward has bias_sizes (arg 3) where the overrideable form has none.
TT_GRAPH_RULE({"aten::convolution_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Args rest(a.begin(), a.end());
  rest.erase(rest.begin() + 3);
  return find_rule("aten::convolution_backward_overrideable")->fn(b, rest, c);
});

}  // namespace
}  // namespace tt::lowering

namespace tt::lowering {
namespace {

// torch._assert_async(t[, msg]) inside a graph (one_hot's range check, for
// one): a device check, raised when the host next waits, as CUDA's
// device-side assert is; eager mode reads the value at once
// (backend/aten/assert_async.cpp). Same message as PyTorch's CPU kernel.
TT_GRAPH_RULE({"aten::_assert_async", "aten::_assert_async.msg"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  if (x.type.numel() != 1) throw LoweringError("_assert_async: expected a tensor of one element");
  Value nonzero = b.reshape(b.convert(x, DType::Pred), {});
  Value bad = b.compare(nonzero, b.constant_int(0, DType::Pred), hlo::Cmp::EQ);
  std::string msg = a.size() > 1 && !a[1].s.empty() ? a[1].s : "Expected Tensor with single nonzero value, but got zero";
  add_check(b, c, bad, b.constant_int(0, DType::S64), CheckError::Runtime, msg);
  return Values{};
});

}  // namespace
}  // namespace tt::lowering
