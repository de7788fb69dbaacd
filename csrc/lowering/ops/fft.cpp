// torch.fft's ATen ops: _fft_c2c, _fft_r2c, _fft_c2r (every torch.fft
// function, stft and istft reduce to these), and unfold_backward (istft's
// overlap-add).
//
// stablehlo.fft transforms the trailing 1 to 3 dimensions, so a transform
// over any dims moves them last (groups of up to 3), transforms, and moves
// them back. XLA's inverse transforms divide by the signal size; ATen's are
// unnormalized, so that factor is undone, then `normalization` applies
// (PyTorch's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n the product of
// the signal sizes).
#include <algorithm>
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

enum class FftType { FFT, IFFT, RFFT, IRFFT };

const char* fft_name(FftType t) {
  switch (t) {
    case FftType::FFT: return "FFT";
    case FftType::IFFT: return "IFFT";
    case FftType::RFFT: return "RFFT";
    default: return "IRFFT";
  }
}

// stablehlo.fft over the trailing lengths.size() dims; `lengths` are the
// signal sizes (for IRFFT, the real output's sizes).
Value trailing_fft(Builder& b, Value x, FftType type, const std::vector<int64_t>& lengths) {
  Type out = x.type;
  if (type == FftType::RFFT) {
    out.dtype = hlo::complex_dtype(x.dtype());
    out.shape.back() = lengths.back() / 2 + 1;
  } else if (type == FftType::IRFFT) {
    out.dtype = hlo::real_dtype(x.dtype());
    out.shape.back() = lengths.back();
  }
  if (numel(out.shape) == 0 || numel(x.shape()) == 0) return b.constant(0, out.dtype, out.shape);
  return b.emit1("stablehlo.fft", {x}, out,
                 std::string("fft_type = #stablehlo<fft_type ") + fft_name(type) +
                     ">, fft_length = " + hlo::i64_array(lengths));
}

// `f` applied with `dims` moved last (in their order), its result moved back.
Value on_trailing(Builder& b, Value x, const std::vector<int64_t>& dims,
                  const std::function<Value(Value)>& f) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  perm.insert(perm.end(), dims.begin(), dims.end());
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return b.transpose(f(b.transpose(x, perm)), inverse);
}

std::vector<int64_t> sizes_of(Value x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> s;
  for (auto d : dims) s.push_back(x.shape()[d]);
  return s;
}

// A complex transform over `dims`, unnormalized in both directions.
Value c2c(Builder& b, Value x, std::vector<int64_t> dims, bool forward) {
  while (!dims.empty()) {
    size_t k = std::min<size_t>(3, dims.size());
    std::vector<int64_t> group(dims.end() - k, dims.end());
    dims.resize(dims.size() - k);
    std::vector<int64_t> lengths = sizes_of(x, group);
    x = on_trailing(b, x, group, [&](Value t) {
      return trailing_fft(b, t, forward ? FftType::FFT : FftType::IFFT, lengths);
    });
    if (!forward) x = b.mul(x, full_like(b, x, static_cast<double>(numel(lengths))));
  }
  return x;
}

// The result scaled as `normalization` says, for a signal of n elements.
Value normalize(Builder& b, Value x, int64_t normalization, int64_t n) {
  if (normalization == 0 || n == 0) return x;
  double s = normalization == 1 ? 1.0 / std::sqrt(static_cast<double>(n)) : 1.0 / static_cast<double>(n);
  return b.mul(x, full_like(b, x, s));
}

std::vector<int64_t> fft_dims(const Arg& dim, int64_t rank) { return wrap_dims(dim.ints, rank); }

// _fft_c2c(self, dim, normalization, forward)
TT_RULE({"aten::_fft_c2c"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = b.convert(a[0].value(), c.out().dtype);
  auto dims = fft_dims(a[1], x.rank());
  Value r = c2c(b, x, dims, a[3].b);
  return Values{normalize(b, r, a[2].i, numel(sizes_of(x, dims)))};
});

// _fft_r2c(self, dim, normalization, onesided): the last dim of `dim` keeps
// n/2 + 1 frequencies when onesided.
TT_RULE({"aten::_fft_r2c"}, [](Builder& b, const Args& a, const Context& c) {
  DType ct = c.out().dtype;
  Value x = b.convert(a[0].value(), hlo::real_dtype(ct));
  auto dims = fft_dims(a[1], x.rank());
  const int64_t n = numel(sizes_of(x, dims));
  Value r;
  if (!a[3].b) {
    r = c2c(b, b.convert(x, ct), dims, true);
  } else {
    size_t k = std::min<size_t>(3, dims.size());
    std::vector<int64_t> group(dims.end() - k, dims.end()), rest(dims.begin(), dims.end() - k);
    std::vector<int64_t> lengths = sizes_of(x, group);
    r = on_trailing(b, x, group, [&](Value t) { return trailing_fft(b, t, FftType::RFFT, lengths); });
    r = c2c(b, r, rest, true);
  }
  return Values{normalize(b, r, a[2].i, n)};
});

// _fft_c2r(self, dim, normalization, last_dim_size): the inverse of a
// onesided transform; the last dim of `dim` holds the first
// last_dim_size/2 + 1 frequencies (fewer are zero-padded, more ignored).
TT_RULE({"aten::_fft_c2r"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = b.convert(a[0].value(), hlo::complex_dtype(out.dtype));
  auto dims = fft_dims(a[1], x.rank());
  const int64_t last = dims.back(), last_size = a[3].i, half = last_size / 2 + 1;
  if (x.shape()[last] > half) {
    std::vector<int64_t> start(x.rank(), 0), limit = x.shape();
    limit[last] = half;
    x = b.slice(x, start, limit);
  } else if (x.shape()[last] < half) {
    std::vector<int64_t> low(x.rank(), 0), high(x.rank(), 0), interior(x.rank(), 0);
    high[last] = half - x.shape()[last];
    x = b.pad(x, b.constant(0, x.dtype()), low, high, interior);
  }
  size_t k = std::min<size_t>(3, dims.size());
  std::vector<int64_t> group(dims.end() - k, dims.end()), rest(dims.begin(), dims.end() - k);
  x = c2c(b, x, rest, false);
  std::vector<int64_t> lengths = sizes_of(x, group);
  lengths.back() = last_size;
  Value r = on_trailing(b, x, group, [&](Value t) { return trailing_fft(b, t, FftType::IRFFT, lengths); });
  r = b.mul(r, full_like(b, r, static_cast<double>(numel(lengths))));
  int64_t n = 1;
  for (auto d : dims) n *= out.shape[d];
  return Values{normalize(b, b.convert(r, out.dtype), a[2].i, n)};
});

// unfold_backward(grad_in, input_sizes, dim, size, step): the gradient of
// Tensor.unfold, i.e. the windows added back where they came from
// (overlap-add). grad_in has `dim` replaced by the window count and a
// trailing window dim of `size`; one scatter-add with index i*step + k.
TT_RULE({"aten::unfold_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value g = b.convert(a[0].value(), out.dtype);
  const int64_t r = static_cast<int64_t>(out.shape.size());
  if (r == 0) throw LoweringError("unfold_backward of a 0-d tensor is not lowered");
  const int64_t dim = wrap_dim(a[2].i, r), size = a[3].i, step = a[4].i;
  const int64_t windows = g.shape()[dim];
  Value zero = b.constant(0, out.dtype, out.shape);
  if (numel(out.shape) == 0 || numel(g.shape()) == 0) return Values{zero};
  // updates [windows, size, other dims...]; operand [other dims..., L].
  std::vector<int64_t> others;
  for (int64_t d = 0; d < r; ++d)
    if (d != dim) others.push_back(d);
  std::vector<int64_t> gperm{dim, r};
  gperm.insert(gperm.end(), others.begin(), others.end());
  Value updates = b.transpose(g, gperm);
  std::vector<int64_t> operm = others;
  operm.push_back(dim);
  Value operand = b.transpose(zero, operm);
  Type it{DType::S64, {windows, size, 1}};
  Value idx = b.add(b.mul(b.iota(it, 0), b.constant_int(step, DType::S64, it.shape)), b.iota(it, 1));
  hlo::Builder::ScatterDims dn;
  for (size_t i = 0; i < others.size(); ++i) dn.update_window_dims.push_back(2 + static_cast<int64_t>(i));
  const int64_t target = static_cast<int64_t>(others.size());
  dn.inserted_window_dims = {target};
  dn.scatter_dims_to_operand_dims = {target};
  dn.index_vector_dim = 2;
  Value summed = b.scatter(operand, idx, updates, dn,
                           [](Builder& b, const Values& v) { return Values{b.add(v[0], v[1])}; });
  std::vector<int64_t> back(r);
  for (int64_t i = 0; i < r; ++i) back[operm[i]] = i;
  return Values{b.transpose(summed, back)};
});

}  // namespace
}  // namespace tt::lowering
