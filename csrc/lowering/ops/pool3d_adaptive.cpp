// Pooling over 2 or 3 trailing spatial dims, one implementation each:
// max_pool{2,3}d_with_indices, avg_pool{2,3}d, _adaptive_avg_pool3d (the 2-D
// one, in conv_pool.cpp, shares adaptive_avg), adaptive_max_pool{2,3}d, each
// with its backward. Indices are flat over the spatial dims of one plane, as in
// PyTorch. Half types compute in f32.
#include <algorithm>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/ops/pooling_common.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using Pads = std::vector<std::pair<int64_t, int64_t>>;


std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t n, const std::vector<int64_t>& dflt) {
  if (v.empty()) return dflt;
  if (v.size() == n) return v;
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  throw LoweringError("pooling: parameter has " + std::to_string(v.size()) + " entries, expected " +
                      std::to_string(n));
}

struct Window {
  std::vector<int64_t> window, strides, dilation;
  Pads pads;
};

// Window geometry over the trailing `nsp` dims of `in`; the high padding is
// whatever makes the output `out` long (ceil_mode's extra reach included).
Window window_geometry(const Shape& in, const Shape& out, size_t nsp, const std::vector<int64_t>& k,
                       const std::vector<int64_t>& s, const std::vector<int64_t>& pad,
                       const std::vector<int64_t>& dil) {
  size_t lead = in.size() - nsp;
  Window w;
  w.window.assign(lead, 1);
  w.strides.assign(lead, 1);
  w.dilation.assign(lead, 1);
  w.pads.assign(lead, {0, 0});
  auto kk = per_dim(k, nsp, {});
  auto ss = per_dim(s, nsp, kk), pp = per_dim(pad, nsp, std::vector<int64_t>(nsp, 0)),
       dd = per_dim(dil, nsp, std::vector<int64_t>(nsp, 1));
  for (size_t i = 0; i < nsp; ++i) {
    int64_t n = in[lead + i], o = out[lead + i];
    int64_t needed = (o - 1) * ss[i] + dd[i] * (kk[i] - 1) + 1;
    w.window.push_back(kk[i]);
    w.strides.push_back(ss[i]);
    w.dilation.push_back(dd[i]);
    w.pads.push_back({pp[i], std::max<int64_t>(needed - n - pp[i], 0)});
  }
  return w;
}

// Flat position of each element within its plane of the trailing nsp dims.
Value plane_index(Builder& b, const Shape& s, size_t nsp) {
  int64_t r = static_cast<int64_t>(s.size());
  Type it{DType::S64, s};
  Value flat = b.constant_int(0, DType::S64, s);
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= r - static_cast<int64_t>(nsp); --d) {
    flat = b.add(flat, b.mul(b.iota(it, d), b.constant_int(stride, DType::S64, s)));
    stride *= s[d];
  }
  return flat;
}

// The max-with-index combiner: the larger value wins, NaN beats numbers
// (PyTorch propagates it), ties go to the smaller index.
Values max_with_index(Builder& bb, const Values& v) {
  Value av = v[0], ai = v[1], xv = v[2], xi = v[3];
  Value a_nan = bb.compare(av, av, Cmp::NE), x_nan = bb.compare(xv, xv, Cmp::NE);
  Value greater = bb.or_(bb.compare(xv, av, Cmp::GT), bb.and_(x_nan, bb.not_(a_nan)));
  Value equal = bb.or_(bb.compare(xv, av, Cmp::EQ), bb.and_(x_nan, a_nan));
  Value take = bb.or_(greater, bb.and_(equal, bb.compare(xi, ai, Cmp::LT)));
  return Values{bb.select(take, xv, av), bb.select(take, xi, ai)};
}

Value lowest(Builder& b, DType t) {
  return hlo::is_float(t) ? b.constant(-std::numeric_limits<double>::infinity(), t) : extreme_identity(b, t, true);
}

Values add_body(Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; }

// Adaptive window i of `out` over `in` covers [floor(i*in/out), ceil((i+1)*in/out)).
int64_t win_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
int64_t win_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// [out, in] 0/1 matrix of the windows along one dim, and each window's length.
std::pair<Value, Value> window_matrix(Builder& b, int64_t in, int64_t out, DType ct) {
  Type t{DType::S64, {out, in}};
  Value i = b.iota(t, 0), h = b.iota(t, 1);
  auto k = [&](int64_t v) { return b.constant_int(v, DType::S64, {out, in}); };
  Value start = b.div(b.mul(i, k(in)), k(out));
  Value end = b.div(b.add(b.mul(b.add(i, k(1)), k(in)), k(out - 1)), k(out));
  Value inside = b.and_(b.compare(h, start, Cmp::GE), b.compare(h, end, Cmp::LT));
  Value len = b.reduce(b.convert(inside, ct), b.constant(0, ct), {1}, "stablehlo.add");
  return {b.convert(inside, ct), len};
}

// x contracted along dim d with m [P, A] (over m's dim `cdim`), the result's dim staying at d.
Value apply_along(Builder& b, Value x, int64_t d, Value m, int64_t cdim) {
  int64_t r = x.rank();
  Value t = b.dot_general(x, m, {}, {}, {d}, {cdim}, x.dtype(), "HIGHEST");  // dim d moved last
  std::vector<int64_t> perm;
  for (int64_t p = 0; p < r; ++p) perm.push_back(p < d ? p : p == d ? r - 1 : p - 1);
  return b.transpose(t, perm);
}

}  // namespace

namespace pooling {

Value scatter_to_planes(Builder& b, Value g, Value idx, const Shape& in, size_t nsp) {
  int64_t lead = static_cast<int64_t>(in.size() - nsp);
  int64_t planes = 1, plane = 1;
  for (int64_t d = 0; d < lead; ++d) planes *= in[d];
  for (size_t d = lead; d < in.size(); ++d) plane *= in[d];
  DType ct = compute_dtype(g.dtype());
  if (g.type.numel() == 0 || numel(in) == 0) return full(b, 0, g.dtype(), in);
  int64_t L = g.type.numel() / planes;
  Value gr = b.reshape(b.convert(g, ct), {planes, L});
  Value ir = b.reshape(b.convert(idx, DType::S64), {planes, L, 1});
  Value rows = b.reshape(b.iota(Type{DType::S64, {planes, L}}, 0), {planes, L, 1});
  hlo::Builder::ScatterDims dn;
  dn.inserted_window_dims = {0, 1};
  dn.scatter_dims_to_operand_dims = {0, 1};
  dn.index_vector_dim = 2;
  Value gi = b.scatter(full(b, 0, ct, {planes, plane}), b.concatenate({rows, ir}, 2), gr, dn,
                       [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; });
  return b.convert(b.reshape(gi, in), g.dtype());
}

void check_nonempty(const Shape& s, size_t nsp, const char* name) {
  int64_t r = static_cast<int64_t>(s.size());
  for (int64_t d = r - static_cast<int64_t>(nsp) - 1; d < r; ++d)
    if (d >= 0 && s[d] == 0)
      throw InvalidArgument(std::string(name) + "(): Expected input to have non-zero size for non-batch "
                            "dimensions, but input has sizes " + hlo::i64_list(s) + " with dimension " +
                            std::to_string(d) + " being empty");
}

Value adaptive_avg(Builder& b, Value x, const Shape& in, const Shape& out, size_t nsp, bool backward) {
  int64_t r = static_cast<int64_t>(in.size());
  DType ct = compute_dtype(x.dtype());
  Value y = b.convert(x, ct);
  Value count = full(b, 1, ct, out);
  Values mats;
  for (size_t i = 0; i < nsp; ++i) {
    int64_t d = r - nsp + i;
    auto [m, len] = window_matrix(b, in[d], out[d], ct);
    mats.push_back(m);
    count = b.mul(count, b.broadcast_in_dim(len, out, {d}));
  }
  if (backward) y = b.div(y, count);
  for (size_t i = 0; i < nsp; ++i) y = apply_along(b, y, r - nsp + i, mats[i], backward ? 0 : 1);
  if (!backward) y = b.div(y, count);
  return y;
}

}  // namespace pooling

namespace {

using pooling::adaptive_avg;
using pooling::check_nonempty;
using pooling::scatter_to_planes;

// ---- max_pool3d_with_indices ------------------------------------------------------

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
Values max_pool(Builder& b, const Args& a, const Context& c, size_t nsp) {
  Value x = a[0].value();
  const Type& o = c.out(0);
  if (o.numel() == 0 || x.type.numel() == 0)
    return Values{full(b, 0, o.dtype, o.shape), full(b, 0, DType::S64, c.out(1).shape)};
  Window w = window_geometry(x.shape(), o.shape, nsp, a[1].ints, a[2].ints, a[3].ints, a[4].ints);
  DType ct = compute_dtype(x.dtype());
  Values r = b.reduce_window({b.convert(x, ct), plane_index(b, x.shape(), nsp)},
                             {lowest(b, ct), b.constant_int(std::numeric_limits<int64_t>::max(), DType::S64)},
                             w.window, w.strides, std::vector<int64_t>(x.rank(), 1), w.dilation, w.pads,
                             max_with_index);
  return Values{b.convert(r[0], o.dtype), r[1]};
}
TT_RULE({"aten::max_pool2d_with_indices"}, [](Builder& b, const Args& a, const Context& c) { return max_pool(b, a, c, 2); });
TT_RULE({"aten::max_pool3d_with_indices"}, [](Builder& b, const Args& a, const Context& c) { return max_pool(b, a, c, 3); });

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel, stride,
//                                       padding, dilation, ceil_mode, indices)
TT_RULE({"aten::max_pool2d_with_indices_backward"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{scatter_to_planes(b, a[0].value(), a[7].value(), a[1].value().shape(), 2)};
});
TT_RULE({"aten::max_pool3d_with_indices_backward"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{scatter_to_planes(b, a[0].value(), a[7].value(), a[1].value().shape(), 3)};
});

// ---- avg_pool3d ----------------------------------------------------------------------

// Divisors: the window size, or (count_include_pad false) the number of real
// elements; ceil_mode's extra reach past the padding never counts.
Value window_counts(Builder& b, const Shape& in, const Window& w, bool include_pad, DType ct) {
  size_t r = in.size();
  std::vector<int64_t> low(r), high(r), extra(r), zero(r, 0);
  for (size_t i = 0; i < r; ++i) {
    low[i] = w.pads[i].first;
    high[i] = std::min(w.pads[i].first, w.pads[i].second);
    extra[i] = w.pads[i].second - high[i];
  }
  Value padded = b.pad(full(b, 1, ct, in), b.constant(include_pad ? 1 : 0, ct), low, high, zero);
  padded = b.pad(padded, b.constant(0, ct), zero, extra, zero);
  return b.reduce_window({padded}, {b.constant(0, ct)}, w.window, w.strides, std::vector<int64_t>(r, 1), w.dilation,
                         Pads(r, {0, 0}), add_body)[0];
}

Value avg_divisor(Builder& b, const Shape& in, const Window& w, const Shape& out, const Arg& include_pad,
                  const Arg& divisor, DType ct) {
  if (!divisor.is_none()) {
    if (divisor.i == 0) throw InvalidArgument("divisor must be not zero");
    return b.constant(static_cast<double>(divisor.i), ct, out);
  }
  return window_counts(b, in, w, include_pad.b, ct);
}

// avg_pool{2,3}d(self, kernel, stride, padding, ceil_mode, count_include_pad,
// divisor_override). PyTorch's CPU avg_pool2d takes int64 (truncating the
// mean); its avg_pool3d takes floating types only.
Values avg_pool(Builder& b, const Args& a, const Context& c, size_t nsp) {
  Value x = a[0].value();
  const Type& o = c.out();
  if (nsp == 3 && !hlo::is_float(x.dtype())) throw LoweringError("avg_pool3d of integers");
  if (o.numel() == 0 || x.type.numel() == 0) return Values{full(b, 0, o.dtype, o.shape)};
  Window w = window_geometry(x.shape(), o.shape, nsp, a[1].ints, a[2].ints, a[3].ints, {});
  DType ct = compute_dtype(x.dtype());
  Value sum = b.reduce_window({b.convert(x, ct)}, {b.constant(0, ct)}, w.window, w.strides,
                              std::vector<int64_t>(x.rank(), 1), w.dilation, w.pads, add_body)[0];
  return Values{b.convert(b.div(sum, avg_divisor(b, x.shape(), w, o.shape, a[5], a[6], ct)), o.dtype)};
}
TT_RULE({"aten::avg_pool2d"}, [](Builder& b, const Args& a, const Context& c) { return avg_pool(b, a, c, 2); });
TT_RULE({"aten::avg_pool3d"}, [](Builder& b, const Args& a, const Context& c) { return avg_pool(b, a, c, 3); });

// avg_pool{2,3}d_backward(grad_output, self, kernel, stride, padding, ceil_mode,
//                          count_include_pad, divisor_override)
Values avg_pool_backward(Builder& b, const Args& a, const Context& c, size_t nsp) {
  Value g = a[0].value(), x = a[1].value();
  const Shape& os = g.shape();
  if (g.type.numel() == 0 || x.type.numel() == 0) return Values{full(b, 0, x.dtype(), x.shape())};
  Window w = window_geometry(x.shape(), os, nsp, a[2].ints, a[3].ints, a[4].ints, {});
  DType ct = compute_dtype(g.dtype());
  Value y = b.div(b.convert(g, ct), avg_divisor(b, x.shape(), w, os, a[6], a[7], ct));
  // Each window's share spread back: dilate by the stride, pad by the
  // window, sum each window, crop the padding.
  size_t r = x.rank();
  std::vector<int64_t> low(r), high(r), interior(r), start(r), limit(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t padded = x.shape()[i] + w.pads[i].first + w.pads[i].second;
    int64_t covered = (os[i] - 1) * w.strides[i] + w.window[i];
    interior[i] = w.strides[i] - 1;
    low[i] = w.window[i] - 1;
    high[i] = w.window[i] - 1 + (padded - covered);
    start[i] = w.pads[i].first;
    limit[i] = w.pads[i].first + x.shape()[i];
  }
  Value spread = b.pad(y, b.constant(0, ct), low, high, interior);
  Value sums = b.reduce_window({spread}, {b.constant(0, ct)}, w.window, std::vector<int64_t>(r, 1),
                               std::vector<int64_t>(r, 1), std::vector<int64_t>(r, 1), Pads(r, {0, 0}), add_body)[0];
  return Values{b.convert(b.slice(sums, start, limit), x.dtype())};
}
TT_RULE({"aten::avg_pool2d_backward"},
        [](Builder& b, const Args& a, const Context& c) { return avg_pool_backward(b, a, c, 2); });
TT_RULE({"aten::avg_pool3d_backward"},
        [](Builder& b, const Args& a, const Context& c) { return avg_pool_backward(b, a, c, 3); });

// ---- adaptive pooling ---------------------------------------------------------------


// _adaptive_avg_pool3d(self, output_size)
TT_RULE({"aten::_adaptive_avg_pool3d"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const Type& o = c.out();
  if (!hlo::is_float(x.dtype())) throw LoweringError("adaptive_avg_pool3d of integers");
  check_nonempty(x.shape(), 3, "adaptive_avg_pool3d");
  if (o.numel() == 0 || x.type.numel() == 0) return Values{full(b, 0, o.dtype, o.shape)};
  return Values{b.convert(adaptive_avg(b, x, x.shape(), o.shape, 3, false), o.dtype)};
});

// _adaptive_avg_pool3d_backward(grad_output, self)
TT_RULE({"aten::_adaptive_avg_pool3d_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value();
  if (g.type.numel() == 0 || x.type.numel() == 0) return Values{full(b, 0, x.dtype(), x.shape())};
  return Values{b.convert(adaptive_avg(b, g, x.shape(), g.shape(), 3, true), x.dtype())};
});

// adaptive_max_pool2d / 3d(self, output_size) -> (out, indices). Each output
// window is gathered into a fixed-size block (the largest window along each
// dim), positions past a shorter window's end masked to -inf, and reduced
// with its flat plane index.
Values adaptive_max(Builder& b, const Args& a, const Context& c, size_t nsp, const char* name) {
  Value x = a[0].value();
  const Type& o = c.out(0);
  check_nonempty(x.shape(), nsp, name);
  if (o.numel() == 0 || x.type.numel() == 0)
    return {full(b, 0, o.dtype, o.shape), full(b, 0, DType::S64, c.out(1).shape)};
  DType ct = compute_dtype(x.dtype());
  int64_t r = x.rank(), lead = r - static_cast<int64_t>(nsp);
  Value vals = b.convert(x, ct), idx = plane_index(b, x.shape(), nsp);
  Value valid;  // i1, same shape as vals
  std::vector<int64_t> red_dims;
  // Gather along each spatial dim in turn: dim d (size in) becomes [out, k].
  int64_t pos = lead;
  for (size_t i = 0; i < nsp; ++i) {
    int64_t in = x.shape()[lead + i], out = o.shape[lead + i], k = 0;
    for (int64_t j = 0; j < out; ++j) k = std::max(k, win_end(j, in, out) - win_start(j, in, out));
    Type t{DType::S64, {out, k}};
    Value start = b.div(b.mul(b.iota(t, 0), b.constant_int(in, DType::S64, {out, k})),
                        b.constant_int(out, DType::S64, {out, k}));
    Value end = b.div(b.add(b.mul(b.add(b.iota(t, 0), b.constant_int(1, DType::S64, {out, k})),
                                  b.constant_int(in, DType::S64, {out, k})),
                            b.constant_int(out - 1, DType::S64, {out, k})),
                      b.constant_int(out, DType::S64, {out, k}));
    Value src = b.add(start, b.iota(t, 1));
    Value inside = b.compare(src, end, Cmp::LT);
    src = b.min(src, b.constant_int(in - 1, DType::S64, {out, k}));
    // index_select along `pos` with the flattened [out*k] sources.
    hlo::Builder::GatherDims dn;
    for (int64_t d = 0; d < vals.rank(); ++d)
      if (d != pos) dn.offset_dims.push_back(d);
    dn.collapsed_slice_dims = {pos};
    dn.start_index_map = {pos};
    dn.index_vector_dim = 1;
    Shape sizes = vals.shape();
    sizes[pos] = 1;
    Shape gathered = vals.shape();
    gathered[pos] = out * k;
    Shape split = vals.shape();
    split[pos] = out;
    split.insert(split.begin() + pos + 1, k);
    Value si = b.reshape(src, {out * k, 1});
    auto take = [&](Value v) { return b.reshape(b.gather(v, si, dn, sizes, gathered), split); };
    vals = take(vals);
    idx = take(idx);
    Value in_b = b.broadcast_in_dim(inside, split, {pos, pos + 1});
    valid = valid.valid() ? b.and_(take(valid), in_b) : in_b;
    red_dims.push_back(pos + 1);
    pos += 2;
  }
  Value neg = b.broadcast_in_dim(lowest(b, ct), vals.shape(), {});
  vals = b.select(valid, vals, neg);
  idx = b.select(valid, idx, b.constant_int(std::numeric_limits<int64_t>::max(), DType::S64, idx.shape()));
  Values r2 = b.reduce({vals, idx}, {lowest(b, ct), b.constant_int(std::numeric_limits<int64_t>::max(), DType::S64)},
                       red_dims, max_with_index);
  return {b.convert(b.reshape(r2[0], o.shape), o.dtype), b.reshape(r2[1], c.out(1).shape)};
}

TT_RULE({"aten::adaptive_max_pool2d"},
        [](Builder& b, const Args& a, const Context& c) { return adaptive_max(b, a, c, 2, "adaptive_max_pool2d"); });
TT_RULE({"aten::adaptive_max_pool3d"},
        [](Builder& b, const Args& a, const Context& c) { return adaptive_max(b, a, c, 3, "adaptive_max_pool3d"); });

// adaptive_max_poolNd_backward(grad_output, self, indices)
TT_RULE({"aten::adaptive_max_pool2d_backward"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{scatter_to_planes(b, a[0].value(), a[2].value(), a[1].value().shape(), 2)};
});
TT_RULE({"aten::adaptive_max_pool3d_backward"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{scatter_to_planes(b, a[0].value(), a[2].value(), a[1].value().shape(), 3)};
});

}  // namespace
}  // namespace tt::lowering
