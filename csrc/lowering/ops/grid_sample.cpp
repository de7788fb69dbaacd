// grid_sampler_2d / grid_sampler_3d and their backward ops: bilinear
// (trilinear), nearest and (2-D) bicubic sampling with zeros, border and
// reflection padding, align_corners either way.
//
// Each output point reads a fixed set of taps (2 / 1 / 4 per spatial dim):
// a tap is an integer input position per dim, a weight and the weight's
// derivative with respect to the source coordinate. The forward gathers the
// taps (channels last, one gather per tap combination) and sums the weighted
// values; the input gradient scatters the weighted grad_output back; the grid
// gradient sums grad_output * value * d(weight) and chains through the
// padding and unnormalisation. Coordinate arithmetic follows PyTorch's CPU
// kernels (unnormalise, reflect, clip; taps outside the input read zero).
#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

enum Mode { Bilinear = 0, Nearest = 1, Bicubic = 2 };
enum Padding { Zeros = 0, Border = 1, Reflection = 2 };

struct Tap {
  Value idx;  // s64 [N, P], clamped into range
  Value inb;  // i1 [N, P]: the position is inside the input
  Value w, dw;
};

struct Sampler {
  Builder& b;
  DType ct;
  Shape np;  // [N, P]

  Value k(double v) { return b.constant(v, ct, np); }

  // Clip into [0, size - 1]; `grad` is 0 where clipped (the borders count as
  // clipped, as in PyTorch's gradient).
  Value clip(Value x, int64_t size, Value* grad) {
    if (grad)
      *grad = b.convert(b.and_(b.compare(x, k(0), Cmp::GT), b.compare(x, k(size - 1), Cmp::LT)), ct);
    return b.clamp(k(0), x, k(size - 1));
  }

  // Reflect x into [twice_low / 2, twice_high / 2]; `grad` is +-1.
  Value reflect(Value x, int64_t twice_low, int64_t twice_high, Value* grad) {
    if (twice_low == twice_high) {
      if (grad) *grad = k(0);
      return k(0);
    }
    double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
    Value d = b.sub(x, k(lo));
    Value neg = b.compare(d, k(0), Cmp::LT);
    Value a = b.abs(d);
    Value extra = b.binary("stablehlo.remainder", a, k(span));
    Value flips = b.unary("stablehlo.floor", b.div(a, k(span)));
    Value even = b.compare(b.binary("stablehlo.remainder", flips, k(2)), k(0), Cmp::EQ);
    if (grad) {
      Value s = b.select(neg, k(-1), k(1));
      *grad = b.select(even, s, b.neg(s));
    }
    return b.select(even, b.add(extra, k(lo)), b.add(b.sub(k(span), extra), k(lo)));
  }

  // PyTorch's compute_coordinates: padding applied to an unnormalised coordinate.
  Value pad_coordinate(Value x, int64_t size, int padding, bool align, Value* grad) {
    if (grad) *grad = k(1);
    if (padding == Border) return clip(x, size, grad);
    if (padding == Reflection) {
      Value gr, gc;
      x = align ? reflect(x, 0, 2 * (size - 1), grad ? &gr : nullptr)
                : reflect(x, -1, 2 * size - 1, grad ? &gr : nullptr);
      x = clip(x, size, grad ? &gc : nullptr);
      if (grad) *grad = b.mul(gr, gc);
    }
    return x;
  }

  Tap tap(Value pos_f, int64_t size, Value w, Value dw) {
    Value i = b.convert(pos_f, DType::S64);
    Shape s = i.shape();
    Value inb = b.and_(b.compare(pos_f, k(0), Cmp::GE), b.compare(pos_f, k(size - 1), Cmp::LE));
    i = b.clamp(b.constant_int(0, DType::S64, s), i, b.constant_int(size - 1, DType::S64, s));
    return {i, inb, w, dw};
  }

  // The taps of one dim for grid coordinates `g` over an input dim of
  // `size`, and the derivative of the source coordinate by the grid's (`mult`).
  std::vector<Tap> taps(Value g, int64_t size, int mode, int padding, bool align, Value* mult) {
    // Unnormalise from [-1, 1].
    Value u = align ? b.mul(b.div(b.add(g, k(1)), k(2)), k(size - 1))
                    : b.div(b.sub(b.mul(b.add(g, k(1)), k(size)), k(1)), k(2));
    *mult = k(align ? (size - 1) / 2.0 : size / 2.0);
    std::vector<Tap> out;
    if (mode == Bicubic) {
      // Padding applies to each tap's position instead of the coordinate.
      Value f = b.unary("stablehlo.floor", u);
      Value t = b.sub(u, f);
      const double A = -0.75;
      // Cubic convolution weights of taps at distance 1 + t, t, 1 - t, 2 - t,
      // and their derivatives in t.
      auto near = [&](Value x) {  // ((A + 2) x - (A + 3)) x^2 + 1
        return b.add(b.mul(b.mul(b.sub(b.mul(k(A + 2), x), k(A + 3)), x), x), k(1));
      };
      auto far = [&](Value x) {  // ((A x - 5A) x + 8A) x - 4A
        return b.sub(b.mul(b.add(b.mul(b.sub(b.mul(k(A), x), k(5 * A)), x), k(8 * A)), x), k(4 * A));
      };
      auto dnear = [&](Value x) { return b.mul(b.sub(b.mul(k(3 * (A + 2)), x), k(2 * (A + 3))), x); };
      auto dfar = [&](Value x) { return b.add(b.mul(b.sub(b.mul(k(3 * A), x), k(10 * A)), x), k(8 * A)); };
      Value one = k(1), two = k(2);
      Value x0 = b.add(t, one), x1 = t, x2 = b.sub(one, t), x3 = b.sub(two, t);
      Values w{far(x0), near(x1), near(x2), far(x3)};
      Values dw{dfar(x0), dnear(x1), b.neg(dnear(x2)), b.neg(dfar(x3))};
      for (int m = 0; m < 4; ++m) {
        Value pos = pad_coordinate(b.add(f, k(m - 1)), size, padding, align, nullptr);
        // The CPU truncates the padded position to an integer.
        pos = b.convert(b.convert(pos, DType::S64), ct);
        out.push_back(tap(pos, size, w[m], dw[m]));
      }
      return out;
    }
    Value pgrad;
    u = pad_coordinate(u, size, padding, align, &pgrad);
    *mult = b.mul(*mult, pgrad);
    if (mode == Nearest) {
      Value r = b.unary("stablehlo.round_nearest_even", u);
      out.push_back(tap(r, size, k(1), k(0)));
      return out;
    }
    Value f = b.unary("stablehlo.floor", u);
    Value f1 = b.add(f, k(1));
    out.push_back(tap(f, size, b.sub(f1, u), k(-1)));
    out.push_back(tap(f1, size, b.sub(u, f), k(1)));
    return out;
  }
};

struct Setup {
  int64_t N, C, P;
  size_t nsp;
  Shape in_sp;                        // input spatial sizes (D, H, W order)
  std::vector<std::vector<Tap>> dim;  // per grid coordinate (x, y, z): taps
  Values mult;                        // per grid coordinate: d source / d grid
};

// Grid [N, O..., nsp] -> taps per coordinate; coordinate k indexes spatial dim nsp - 1 - k.
Setup setup(Builder& b, Value input, Value grid, int mode, int padding, bool align, DType ct) {
  Setup s;
  s.nsp = input.rank() - 2;
  s.N = input.shape()[0];
  s.C = input.shape()[1];
  s.in_sp.assign(input.shape().begin() + 2, input.shape().end());
  s.P = grid.type.numel() / std::max<int64_t>(s.N * static_cast<int64_t>(s.nsp), 1);
  Value g = b.reshape(b.convert(grid, ct), {s.N, s.P, static_cast<int64_t>(s.nsp)});
  Sampler sm{b, ct, {s.N, s.P}};
  for (size_t k = 0; k < s.nsp; ++k) {
    Value gk = b.reshape(b.slice(g, {0, 0, static_cast<int64_t>(k)}, {s.N, s.P, static_cast<int64_t>(k) + 1}),
                         {s.N, s.P});
    Value m;
    s.dim.push_back(sm.taps(gk, s.in_sp[s.nsp - 1 - k], mode, padding, align, &m));
    s.mult.push_back(m);
  }
  return s;
}

// Calls f(taps, weight) for every combination of one tap per coordinate.
void for_each_combination(Builder& b, const Setup& s,
                          const std::function<void(const std::vector<const Tap*>&, Value)>& f) {
  std::vector<size_t> pick(s.nsp, 0);
  while (true) {
    std::vector<const Tap*> taps;
    Value w;
    for (size_t k = 0; k < s.nsp; ++k) {
      taps.push_back(&s.dim[k][pick[k]]);
      w = w.valid() ? b.mul(w, taps.back()->w) : taps.back()->w;
    }
    f(taps, w);
    size_t k = 0;
    while (k < s.nsp && ++pick[k] == s.dim[k].size()) pick[k++] = 0;
    if (k == s.nsp) break;
  }
}

// Gather / scatter coordinates [N, P, 1 + nsp] (batch, then spatial dims in order).
Value coords(Builder& b, const Setup& s, const std::vector<const Tap*>& taps) {
  Values parts{b.reshape(b.iota(Type{DType::S64, {s.N, s.P}}, 0), {s.N, s.P, 1})};
  for (size_t j = 0; j < s.nsp; ++j) parts.push_back(b.reshape(taps[s.nsp - 1 - j]->idx, {s.N, s.P, 1}));
  return b.concatenate(parts, 2);
}

Value inside(Builder& b, const std::vector<const Tap*>& taps) {
  Value m = taps[0]->inb;
  for (size_t k = 1; k < taps.size(); ++k) m = b.and_(m, taps[k]->inb);
  return m;
}

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// [N, C, S...] -> [N, S..., C] and back.
Value channels_last(Builder& b, Value x) {
  std::vector<int64_t> perm{0};
  for (int64_t d = 2; d < x.rank(); ++d) perm.push_back(d);
  perm.push_back(1);
  return b.transpose(x, perm);
}
Value channels_first(Builder& b, Value x) {
  std::vector<int64_t> perm{0, x.rank() - 1};
  for (int64_t d = 1; d < x.rank() - 1; ++d) perm.push_back(d);
  return b.transpose(x, perm);
}

Value gather_taps(Builder& b, const Setup& s, Value xt, Value idx) {
  hlo::Builder::GatherDims dn;
  dn.offset_dims = {2};
  dn.collapsed_slice_dims = range(0, 1 + s.nsp);
  dn.start_index_map = range(0, 1 + s.nsp);
  dn.index_vector_dim = 2;
  Shape sizes(1 + s.nsp, 1);
  sizes.push_back(s.C);
  return b.gather(xt, idx, dn, sizes, {s.N, s.P, s.C});
}

// PyTorch's CPU kernels compute half types in the half type itself (every
// operation rounded), so they do here too.
DType compute_type(DType t) { return t; }

void check_modes(int mode, int padding, size_t nsp) {
  if (mode < 0 || mode > 2 || (nsp == 3 && mode == Bicubic))
    throw InvalidArgument("grid_sampler(): invalid interpolation mode " + std::to_string(mode));
  if (padding < 0 || padding > 2) throw InvalidArgument("grid_sampler(): invalid padding mode " + std::to_string(padding));
}

// grid_sampler_2d / 3d(input, grid, interpolation_mode, padding_mode, align_corners)
Values grid_sampler(Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), grid = a[1].value();
  const Type& o = c.out();
  int mode = static_cast<int>(a[2].i), padding = static_cast<int>(a[3].i);
  check_modes(mode, padding, x.rank() - 2);
  if (o.numel() == 0 || x.type.numel() == 0) return {full(b, 0, o.dtype, o.shape)};
  DType ct = compute_type(x.dtype());
  Setup s = setup(b, x, grid, mode, padding, a[4].b, ct);
  Value xt = channels_last(b, b.convert(x, ct));
  Shape npc{s.N, s.P, s.C};
  Value acc = full(b, 0, ct, npc);
  for_each_combination(b, s, [&](const std::vector<const Tap*>& taps, Value w) {
    Value v = gather_taps(b, s, xt, coords(b, s, taps));
    v = b.select(b.broadcast_in_dim(inside(b, taps), npc, {0, 1}), v, full(b, 0, ct, npc));
    acc = b.add(acc, b.mul(v, b.broadcast_in_dim(w, npc, {0, 1})));
  });
  Shape out_last{s.N};
  out_last.insert(out_last.end(), o.shape.begin() + 2, o.shape.end());
  out_last.push_back(s.C);
  return {b.convert(channels_first(b, b.reshape(acc, out_last)), o.dtype)};
}

// grid_sampler_2d / 3d_backward(grad_output, input, grid, interpolation_mode,
//   padding_mode, align_corners, output_mask) -> (grad_input, grad_grid)
Values grid_sampler_backward(Builder& b, const Args& a, const Context& c) {
  Value go = a[0].value(), x = a[1].value(), grid = a[2].value();
  int mode = static_cast<int>(a[3].i), padding = static_cast<int>(a[4].i);
  bool want_input = a[6].bools.empty() || a[6].bools[0];
  check_modes(mode, padding, x.rank() - 2);
  DType ct = compute_type(x.dtype());
  if (go.type.numel() == 0 || x.type.numel() == 0)
    return {want_input ? full(b, 0, x.dtype(), x.shape()) : Value{}, full(b, 0, grid.dtype(), grid.shape())};
  Setup s = setup(b, x, grid, mode, padding, a[5].b, ct);
  Value xt = channels_last(b, b.convert(x, ct));
  Shape npc{s.N, s.P, s.C};
  Value g = b.reshape(channels_last(b, b.convert(go, ct)), npc);
  Value gin = full(b, 0, ct, xt.shape());
  Values ggrid(s.nsp);
  for (auto& v : ggrid) v = full(b, 0, ct, {s.N, s.P});
  hlo::Builder::ScatterDims dn;
  dn.update_window_dims = {2};
  dn.inserted_window_dims = range(0, 1 + s.nsp);
  dn.scatter_dims_to_operand_dims = range(0, 1 + s.nsp);
  dn.index_vector_dim = 2;
  for_each_combination(b, s, [&](const std::vector<const Tap*>& taps, Value w) {
    Value idx = coords(b, s, taps);
    Value in = b.broadcast_in_dim(inside(b, taps), npc, {0, 1});
    Value zero = full(b, 0, ct, npc);
    if (want_input) {
      Value upd = b.select(in, b.mul(g, b.broadcast_in_dim(w, npc, {0, 1})), zero);
      gin = b.scatter(gin, idx, upd, dn, [](Builder& bb, const Values& v) { return Values{bb.add(v[0], v[1])}; });
    }
    if (mode == Nearest) return;
    Value v = b.select(in, gather_taps(b, s, xt, idx), zero);
    Value gv = b.reduce(b.mul(g, v), b.constant(0, ct), {2}, "stablehlo.add");  // [N, P]
    for (size_t k = 0; k < s.nsp; ++k) {
      Value d = taps[k]->dw;
      for (size_t j = 0; j < s.nsp; ++j)
        if (j != k) d = b.mul(d, taps[j]->w);
      ggrid[k] = b.add(ggrid[k], b.mul(gv, d));
    }
  });
  Values parts;
  for (size_t k = 0; k < s.nsp; ++k)
    parts.push_back(b.reshape(b.mul(ggrid[k], s.mult[k]), {s.N, s.P, 1}));
  Value gg = b.convert(b.reshape(b.concatenate(parts, 2), grid.shape()), grid.dtype());
  return {want_input ? b.convert(channels_first(b, gin), x.dtype()) : Value{}, gg};
}

TT_RULE({"aten::grid_sampler_2d", "aten::grid_sampler_3d"}, grid_sampler);
TT_RULE({"aten::grid_sampler_2d_backward", "aten::grid_sampler_3d_backward"}, grid_sampler_backward);

}  // namespace
}  // namespace tt::lowering
