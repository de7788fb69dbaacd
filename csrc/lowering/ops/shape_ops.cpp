// Shape ops that produce new tensors: cat, flip, roll, channel_shuffle,
// tril/triu, constant_pad_nd, and the factories arange (whose shape depends on
// its scalars), eye, linspace and logspace.
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

TT_RULE({"aten::cat"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  Values parts;
  for (const Value& t : a[0].tensors) {
    // PyTorch skips legacy empty 1-D inputs of shape [0] whatever the rank.
    if (t.rank() == 1 && t.shape()[0] == 0 && o.rank() != 1) continue;
    parts.push_back(b.convert(t, o.dtype));
  }
  int64_t dim = wrap_dim(a[1].i, o.rank());
  Values nonempty;
  for (const Value& p : parts) if (p.shape()[dim] > 0) nonempty.push_back(p);
  if (nonempty.empty()) return Values{full(b, 0, o.dtype, o.shape)};
  return Values{b.concatenate(nonempty, dim)};
});

TT_RULE({"aten::flip"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  if (x.rank() == 0) return Values{x};
  return Values{b.reverse(x, wrap_dims(a[1].ints, x.rank()))};
});

// roll(self, shifts, dims): with no dims, rolls the flattened tensor.
TT_RULE({"aten::roll"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  Shape shape = x.shape();
  std::vector<int64_t> dims = a[2].ints, shifts = a[1].ints;
  if (dims.empty()) {
    x = b.reshape(x, {x.type.numel()});
    dims = {0};
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = wrap_dim(dims[k], x.rank());
    int64_t n = x.shape()[d];
    if (n == 0) continue;
    int64_t s = ((shifts[k] % n) + n) % n;
    if (s == 0) continue;
    std::vector<int64_t> start(x.rank(), 0), mid = x.shape(), end = x.shape();
    std::vector<int64_t> split = start;
    split[d] = n - s;
    mid[d] = n - s;
    Value head = b.slice(x, start, mid);
    Value tail = b.slice(x, split, end);
    x = b.concatenate({tail, head}, d);
  }
  return Values{b.reshape(x, shape)};
});

// channel_shuffle(x, groups): [N, g, C/g, *] -> [N, C/g, g, *] -> [N, C, *].
TT_RULE({"aten::channel_shuffle", "aten::native_channel_shuffle"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t g = a[1].i;
  if (x.rank() < 3) throw std::runtime_error("channel_shuffle expects input to have at least 3 dimensions");
  if (g <= 0 || x.shape()[1] % g)
    throw std::runtime_error("Number of channels must be divisible by groups. Got " + std::to_string(x.shape()[1]) +
                             " channels and " + std::to_string(g) + " groups.");
  Shape s = x.shape();
  Shape split{s[0], g, s[1] / g};
  split.insert(split.end(), s.begin() + 2, s.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (int64_t k = 3; k < static_cast<int64_t>(split.size()); ++k) perm.push_back(k);
  return Values{b.reshape(b.transpose(b.reshape(x, split), perm), s)};
});

Values triangle(Builder& b, const Args& a, bool lower) {
  Value x = a[0].value();
  if (x.rank() < 2) throw LoweringError("tril/triu: input tensor must have at least 2 dimensions");
  int64_t k = a[1].i;
  Type it{DType::S64, x.shape()};
  Value rows = b.iota(it, x.rank() - 2), cols = b.iota(it, x.rank() - 1);
  Value diff = b.sub(cols, rows);  // j - i
  Value kk = b.constant_int(k, DType::S64, x.shape());
  Value keep = lower ? b.compare(diff, kk, hlo::Cmp::LE) : b.compare(diff, kk, hlo::Cmp::GE);
  return {b.select(keep, x, full_like(b, x, 0))};
}

TT_RULE({"aten::tril"}, [](Builder& b, const Args& a, const Context&) { return triangle(b, a, true); });
TT_PADDING({"aten::tril"}, Padding::elementwise());
TT_RULE({"aten::triu"}, [](Builder& b, const Args& a, const Context&) { return triangle(b, a, false); });
TT_PADDING({"aten::triu"}, Padding::elementwise());

// constant_pad_nd(self, pad, value): pad pairs start at the last dim;
// negative pads crop (StableHLO pad accepts negative edge padding).
TT_RULE({"aten::constant_pad_nd"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  const auto& pad = a[1].ints;
  std::vector<int64_t> low(x.rank(), 0), high(x.rank(), 0), interior(x.rank(), 0);
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size() / 2) > x.rank())
    throw LoweringError("constant_pad_nd: padding length must be even and at most twice the rank");
  for (size_t k = 0; 2 * k < pad.size(); ++k) {
    int64_t d = x.rank() - 1 - static_cast<int64_t>(k);
    low[d] = pad[2 * k];
    high[d] = pad[2 * k + 1];
  }
  Value v = b.convert(a[2].value(), x.dtype());
  Value r = b.pad(x, v, low, high, interior);
  return Values{b.convert(r, c.out().dtype)};
});

// arange(end) / arange.start(start, end) / arange.start_step(start, end,
// step): start + i * step, in f64 for floating results (PyTorch's CPU kernel
// accumulates in double). All three are registered because PyTorch's
// composite arange calls the next one without dispatching.
TT_RULE({"aten::arange", "aten::arange.start", "aten::arange.start_step"},
        [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  bool has_start = c.op != "aten::arange", has_step = c.op == "aten::arange.start_step";
  const Arg* start = has_start ? &a[0] : nullptr;
  const Arg* step = has_step ? &a[2] : nullptr;
  DType ct = hlo::is_float(o.dtype) ? DType::F64 : DType::S64;
  auto scalar = [&](const Arg* x, int64_t dflt) {
    if (!x) return b.constant_int(dflt, ct, o.shape);
    return ct == DType::S64 ? b.constant_int(x->i, ct, o.shape) : b.constant(x->d, ct, o.shape);
  };
  Value i = b.iota(Type{ct, o.shape}, 0);
  return Values{b.convert(b.add(scalar(start, 0), b.mul(i, scalar(step, 1))), o.dtype)};
}, false, /*static_scalars=*/true);
TT_PADDING({"aten::arange", "aten::arange.start", "aten::arange.start_step"}, Padding::creation());

// eye(n) / eye.m(n, m): ones where row == column.
TT_RULE({"aten::eye", "aten::eye.m"}, [](Builder& b, const Args&, const Context& c) {
  const Type& o = c.out();
  Type it{DType::S64, o.shape};
  Value diag = b.compare(b.iota(it, 0), b.iota(it, 1), hlo::Cmp::EQ);
  return Values{b.convert(diag, o.dtype)};
});

// linspace(start, end, steps): PyTorch's CPU formula, stepping forward from
// start in the first half and backward from end in the second, in f64.
TT_RULE({"aten::linspace"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  int64_t n = a[2].i;
  Shape s{n};
  DType ct = DType::F64;
  // As PyTorch's CPU kernel: an integer linspace first truncates start and
  // end to the integer type, steps in double, and truncates each value.
  auto bound = [&](const Arg& x) {
    Value v = x.value();
    if (!hlo::is_float(o.dtype)) v = b.convert(v, o.dtype);
    return cast_to(b, v, ct, s);
  };
  Value start = bound(a[0]), end = bound(a[1]);
  if (n == 1) return Values{b.convert(start, o.dtype)};
  Value step = b.div(b.sub(end, start), b.constant(static_cast<double>(n - 1), ct, s));
  Value i = b.iota(Type{ct, s}, 0);
  Value fwd = b.add(start, b.mul(i, step));
  Value bwd = b.sub(end, b.mul(b.sub(b.constant(static_cast<double>(n - 1), ct, s), i), step));
  Value first_half = b.compare(i, b.constant(static_cast<double>(n / 2), ct, s), hlo::Cmp::LT);
  Value v = b.select(first_half, fwd, bwd);
  return Values{b.convert(v, o.dtype)};
});

// logspace(start, end, steps, base): base ** (linspace's points), with
// linspace's two-sided stepping, in f64.
TT_RULE({"aten::logspace"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  if (!is_float(o.dtype)) throw LoweringError("integer logspace is not lowered yet");
  int64_t n = a[2].i;
  double base = a[3].d;
  Shape s{n};
  DType ct = DType::F64;
  Value start = cast_to(b, a[0].value(), ct, s), end = cast_to(b, a[1].value(), ct, s);
  Value e = start;
  if (n > 1) {
    Value step = b.div(b.sub(end, start), b.constant(static_cast<double>(n - 1), ct, s));
    Value i = b.iota(Type{ct, s}, 0);
    Value fwd = b.add(start, b.mul(i, step));
    Value bwd = b.sub(end, b.mul(b.sub(b.constant(static_cast<double>(n - 1), ct, s), i), step));
    e = b.select(b.compare(i, b.constant(static_cast<double>(n / 2), ct, s), Cmp::LT), fwd, bwd);
  }
  return Values{b.convert(b.binary("stablehlo.power", b.constant(base, ct, s), e), o.dtype)};
}, false, /*static_scalars=*/true);

}  // namespace
}  // namespace tt::lowering
