// torch._grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None): the
// grouped matmul that mixture-of-experts layers call, as one program.
// offs (int32, G) holds the cumulative group ends along the grouped dim;
// group g spans [offs[g-1], offs[g]) (offs[-1] = 0):
//   2D (M, K) x 3D (G, K, N) -> (M, N): rows of group g times mat2[g];
//   3D (G, M, K) x 2D (K, N) -> (M, N): columns of group g are self[g] times
//     those columns of mat2;
//   2D (M, K) x 2D (K, N) -> (G, M, N): result g is the product over the
//     contraction indices of group g;
//   3D x 3D (no offs): a batched matmul.
// Autograd's derivative calls _grouped_mm again on transposes, so backward
// runs through this rule too.
//
// A ragged group has no static size, so each ragged layout is one
// stablehlo.while over (group, tile) pairs: a fixed-size tile of indices
// (tile_for) starting where the group's unprocessed part starts, multiplied
// whole and kept only where its indices belong to the group. The loop runs
// at most ceil(size / tile) + G times and does about (size + G * tile / 2) /
// size times the matmul work of the products themselves, instead of G times
// for a masked dense product. (XLA's CPU compiler rejects the ragged-dot HLO,
// which a TPU would run natively.)
// Rows (or columns) past offs[G-1] are zeros (the CPU leaves them unwritten);
// offs that decrease give empty groups. bf16/f16 multiply in f32 and round
// once at the end, as PyTorch's CPU kernel accumulates.
#include <algorithm>

#include "lowering/external_op.h"
#include "lowering/helpers.h"
#include "lowering/ops/kernel_choice.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// Indices per tile: the power of two at or above the mean group size
// (indices / groups), within [kMinTile, kMaxTile]. A group wastes on average
// half a tile at its end, so tiles near the mean group size keep the work
// within about 1.5x of the products themselves. (Measured with
// benchmarks/grouped_mm.py, 4096 tokens, 512 -> 512: a fixed 256-row tile
// made 32 groups of 128 rows 1.8x slower than the per-group decomposition;
// 128-row tiles halved the native step.)
constexpr int64_t kMinTile = 16;
constexpr int64_t kMaxTile = 256;

int64_t tile_for(int64_t indices, int64_t groups) {
  int64_t mean = groups > 0 ? (indices + groups - 1) / groups : indices;
  int64_t tile = kMinTile;
  while (tile < mean && tile < kMaxTile) tile *= 2;
  return std::max<int64_t>(1, std::min(tile, indices));
}

Value s32(Builder& b, int64_t v) { return b.constant_int(v, DType::S32); }

// offs[g] as a 0-d s32, clamped to [lo, hi].
Value group_end(Builder& b, Value offs, Value g, Value lo, int64_t hi) {
  Value end = b.reshape(b.dynamic_slice(offs, {g}, {1}), {});
  return b.max(lo, b.min(end, s32(b, hi)));
}

// The loop's advance: the tile [s, s + tile) covered the group up to `end`
// when s + tile >= end; then the next group starts at `end`.
Values advance(Builder& b, Value g, Value s, Value end, int64_t tile) {
  Value next = b.min(b.add(s, s32(b, tile)), end);
  Value done = b.compare(next, end, Cmp::EQ);
  return {b.select(done, b.add(g, s32(b, 1)), g), next};
}

// `keep` (tile,) indices s + i < end, broadcast along `dim` of `shape`.
Value in_group(Builder& b, Value s, Value end, const Shape& shape, int64_t dim) {
  Type it{DType::S32, shape};
  Value idx = b.add(b.iota(it, dim), b.broadcast_in_dim(s, shape, {}));
  return b.compare(idx, b.broadcast_in_dim(end, shape, {}), Cmp::LT);
}

Value pad_dim(Builder& b, Value x, int64_t dim, int64_t extra) {
  std::vector<int64_t> lo(x.rank(), 0), hi(x.rank(), 0), in(x.rank(), 0);
  hi[dim] = extra;
  return b.pad(x, b.constant(0, x.dtype()), lo, hi, in);
}

// a (M, K) rows grouped by offs, w (G, K, N) -> (M, N).
Value ragged_rows(Builder& b, Value a, Value w, Value offs, DType acc) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = w.shape()[2], groups = w.shape()[0];
  const int64_t tile = tile_for(m, groups);
  Values r = b.while_loop(
      {s32(b, 0), s32(b, 0), b.constant(0, acc, {m + tile, n}), pad_dim(b, a, 0, tile), w, offs},
      [groups](Builder& bb, const Values& st) { return Values{bb.compare(st[0], s32(bb, groups), Cmp::LT)}; },
      [=](Builder& bb, const Values& st) {
        Value g = st[0], s = st[1], out = st[2], ap = st[3], w = st[4], offs = st[5];
        Value end = group_end(bb, offs, g, s, m);
        Value z = s32(bb, 0);
        Value at = bb.dynamic_slice(ap, {s, z}, {tile, k});
        Value wg = bb.reshape(bb.dynamic_slice(w, {g, z, z}, {1, k, n}), {k, n});
        Value prod = bb.dot_general(at, wg, {}, {}, {1}, {0}, acc, matmul_precision());
        Value cur = bb.dynamic_slice(out, {s, z}, {tile, n});
        out = bb.dynamic_update_slice(out, bb.select(in_group(bb, s, end, {tile, n}, 0), prod, cur), {s, z});
        Values next = advance(bb, g, s, end, tile);
        return Values{next[0], next[1], out, ap, w, offs};
      });
  return b.slice(r[2], {0, 0}, {m, n});
}

// a (M, K), w (K, N), the contraction dim grouped by offs -> (G, M, N).
Value ragged_contraction(Builder& b, Value a, Value w, Value offs, DType acc) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = w.shape()[1], groups = offs.shape()[0];
  const int64_t tile = tile_for(k, groups);
  Values r = b.while_loop(
      {s32(b, 0), s32(b, 0), b.constant(0, acc, {groups, m, n}), pad_dim(b, a, 1, tile), pad_dim(b, w, 0, tile), offs},
      [groups](Builder& bb, const Values& st) { return Values{bb.compare(st[0], s32(bb, groups), Cmp::LT)}; },
      [=](Builder& bb, const Values& st) {
        Value g = st[0], s = st[1], out = st[2], ap = st[3], wp = st[4], offs = st[5];
        Value end = group_end(bb, offs, g, s, k);
        Value z = s32(bb, 0);
        Value at = bb.dynamic_slice(ap, {z, s}, {m, tile});
        Value wt = bb.dynamic_slice(wp, {s, z}, {tile, n});
        // Both factors are zeroed outside the group (0 * inf would be nan).
        at = bb.select(in_group(bb, s, end, {m, tile}, 1), at, bb.constant(0, acc, {m, tile}));
        wt = bb.select(in_group(bb, s, end, {tile, n}, 0), wt, bb.constant(0, acc, {tile, n}));
        Value prod = bb.dot_general(at, wt, {}, {}, {1}, {0}, acc, matmul_precision());
        Value cur = bb.dynamic_slice(out, {g, z, z}, {1, m, n});
        out = bb.dynamic_update_slice(out, bb.add(cur, bb.reshape(prod, {1, m, n})), {g, z, z});
        Values next = advance(bb, g, s, end, tile);
        return Values{next[0], next[1], out, ap, wp, offs};
      });
  return r[2];
}

// The result type of a call whose arguments PyTorch's meta kernel did not
// check (it takes bfloat16 only; the CPU kernel also float32 and float16):
// the CPU kernel's checks, in its words.
Type checked_result_type(const Args& a) {
  Value x = a[0].value(), w = a[1].value();
  auto name = [](DType t) {
    switch (t) {
      case DType::F16: return "Half";
      case DType::F32: return "Float";
      case DType::BF16: return "BFloat16";
      case DType::F64: return "Double";
      default: return hlo::mlir_name(t);
    }
  };
  if (x.dtype() != DType::F32 && x.dtype() != DType::F16 && x.dtype() != DType::BF16)
    throw InvalidArgument(std::string("Expected mat_a to be Float32, BFloat16 or Float16 matrix, got ") +
                          name(x.dtype()));
  if (x.dtype() != w.dtype())
    throw InvalidArgument(std::string("expected m1 and m2 to have the same dtype, but got: ") + name(x.dtype()) +
                          " != " + name(w.dtype()));
  // out_dtype (a ScalarType: 5 Half, 6 Float, 15 BFloat16) must be mat_a's.
  if (!a[4].is_none()) {
    int64_t st = a[4].i;
    DType t = st == 5 ? DType::F16 : st == 6 ? DType::F32 : st == 15 ? DType::BF16 : DType::Pred;
    if (t != x.dtype()) throw InvalidArgument("Grouped gemm output dtype must match `mat_a` dtype");
  }
  if (!a[3].is_none()) throw InvalidArgument("Bias not supported yet");
  if ((x.rank() != 2 && x.rank() != 3) || (w.rank() != 2 && w.rank() != 3))
    throw InvalidArgument("mat_a has to be 2 or 3d, mat_b has to be 2 or 3d");
  bool has_offs = !a[2].is_none();
  if (has_offs != (x.rank() == 2 || w.rank() == 2))
    throw InvalidArgument("Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  if (has_offs) {
    Value offs = a[2].value();
    if (offs.rank() != 1) throw InvalidArgument("offs has to be 1D");
    if (offs.dtype() != DType::S32) throw InvalidArgument("Offsets have to be int32");
  }
  const Shape &xs = x.shape(), &ws = w.shape();
  if (xs.back() != ws[ws.size() - 2]) throw InvalidArgument("contraction dimension of mat_a and mat_b must match");
  int64_t groups = has_offs ? a[2].value().shape()[0] : 0;
  if (x.rank() == 2 && w.rank() == 2) return Type{x.dtype(), {groups, xs[0], ws[1]}};
  if (x.rank() == 2) {
    if (ws[0] != groups) throw InvalidArgument("matrix batch sizes have to match");
    return Type{x.dtype(), {xs[0], ws[2]}};
  }
  if (w.rank() == 2) {
    if (xs[0] != groups) throw InvalidArgument("matrix batch sizes have to match");
    return Type{x.dtype(), {xs[1], ws[1]}};
  }
  if (xs[0] != ws[0]) throw InvalidArgument("batched dimension has to match");
  return Type{x.dtype(), {xs[0], xs[1], ws[2]}};
}

// The grouped-matmul kernel (torch_tpu/kernels/grouped_matmul.py): megablox's
// Pallas TPU kernels gmm (2D x 3D, rows grouped) and tgmm (2D x 2D, the
// contraction grouped), in tiles of up to 128 along each dimension. They
// assume offs that never decrease (an MoE layer's cumulative token counts).
constexpr const char* kGroupedRows = "tpu_kernels::grouped_matmul";
constexpr const char* kGroupedContraction = "tpu_kernels::grouped_matmul_contraction";
constexpr int64_t kKernelTile = 128;

// The kernel a call takes (kernel_choice.h), or nullptr for the XLA lowering.
// Automatically: every dimension a multiple of the tile, on a plugin the
// kernels are for; forced: every dimension tiles (at most one tile, or whole
// tiles).
const char* grouped_kernel(const Value& x, const Value& w, bool has_offs) {
  KernelChoice choice = grouped_mm_choice();
  if (!has_offs || x.rank() != 2 || choice == KernelChoice::Xla) return nullptr;
  bool forced = choice == KernelChoice::Kernel;
  auto fits = [forced](int64_t d) { return d % kKernelTile == 0 || (forced && d <= kKernelTile); };
  for (int64_t d : x.shape())
    if (!fits(d)) return nullptr;
  for (size_t i = w.shape().size() - 2; i < w.shape().size(); ++i)
    if (!fits(w.shape()[i])) return nullptr;
  const char* name = w.rank() == 3 ? kGroupedRows : kGroupedContraction;
  if (!is_external_op(name) || (!forced && !kernels_for_plugin())) return nullptr;
  return name;
}

// _grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None,
//   ScalarType? out_dtype=None) -> Tensor. For bfloat16, PyTorch's meta
// kernel has checked the call (layouts, offs, bias, strides).
TT_RULE({"aten::_grouped_mm"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value(), w = a[1].value();
  const Type out = c.out_types.empty() ? checked_result_type(a) : c.out(0);
  DType acc = compute_dtype(out.dtype);
  if (numel(out.shape) == 0) return Values{b.constant(0, out.dtype, out.shape)};
  if (const char* kernel = grouped_kernel(x, w, !a[2].is_none())) {
    Values r = call_external(kernel, b, Values{x, w, b.convert(a[2].value(), DType::S32)}, {}, c);
    return Values{b.convert(r[0], out.dtype)};
  }
  x = b.convert(x, acc);
  w = b.convert(w, acc);
  Value r;
  if (x.rank() == 3 && w.rank() == 3) {
    r = b.dot_general(x, w, {0}, {0}, {2}, {1}, acc, matmul_precision());
  } else {
    Value offs = b.convert(a[2].value(), DType::S32);
    if (x.rank() == 2 && w.rank() == 3) {
      r = ragged_rows(b, x, w, offs, acc);
    } else if (x.rank() == 3 && w.rank() == 2) {
      // (M, N) columns grouped: its transpose is w^T's rows grouped times x^T.
      r = b.transpose(ragged_rows(b, b.transpose(w, {1, 0}), b.transpose(x, {0, 2, 1}), offs, acc), {1, 0});
    } else {
      r = ragged_contraction(b, x, w, offs, acc);
    }
  }
  if (r.shape() != out.shape) throw LoweringError("grouped_mm: unexpected result shape");
  return Values{b.convert(r, out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
