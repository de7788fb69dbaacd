#include "lowering/helpers.h"

#include <atomic>

#include <algorithm>

namespace tt::lowering {

using hlo::bit_width;
using hlo::is_complex;
using hlo::is_float;
using hlo::is_unsigned;

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Pred) return b;
  if (b == DType::Pred) return a;
  if (is_complex(a) || is_complex(b)) {
    // The complex type whose parts hold both operands' real types.
    DType ra = hlo::real_dtype(a), rb = hlo::real_dtype(b);
    DType parts = !is_float(ra) ? rb : !is_float(rb) ? ra : promote_types(ra, rb);
    return hlo::complex_dtype(parts);
  }
  if (is_float(a) || is_float(b)) {
    if (!is_float(a)) return b;
    if (!is_float(b)) return a;
    // f16 with bf16 meets at f32; otherwise the wider float wins.
    if (bit_width(a) == bit_width(b)) return DType::F32;
    return bit_width(a) > bit_width(b) ? a : b;
  }
  bool ua = is_unsigned(a), ub = is_unsigned(b);
  if (ua == ub) return bit_width(a) >= bit_width(b) ? a : b;
  DType u = ua ? a : b, s = ua ? b : a;
  // uint8 with a signed type: the signed type, widened to hold 0..255.
  if (u == DType::U8) return bit_width(s) > 8 ? s : DType::S16;
  return DType::S64;
}

DType to_float(DType t) { return is_float(t) || is_complex(t) ? t : DType::F32; }

namespace {
enum class Slot { Dim, Zero, Wrapped };

// PyTorch's combine_categories (c10's ResultTypeState): a lower-priority
// slot lifts the result only to a higher category (bool < int < float <
// complex); a complex one makes a float result complex.
DType combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower.value_or(DType::F32);
  if (is_complex(*higher)) return *higher;
  if (is_float(*higher)) return lower && is_complex(*lower) ? hlo::complex_dtype(*higher) : *higher;
  if (*higher == DType::Pred || (lower && (is_float(*lower) || is_complex(*lower))))
    return lower ? promote_types(*higher, *lower) : *higher;
  return *higher;
}
}  // namespace

DType promote(const std::vector<const Arg*>& args) {
  std::optional<DType> dim, zero, wrapped;
  auto update = [](std::optional<DType>& slot, DType t) {
    slot = slot ? promote_types(*slot, t) : t;
  };
  for (const Arg* a : args) {
    if (!a || a->is_none()) continue;
    if (a->kind == Arg::Kind::Scalar || (a->is_tensor() && a->wrapped)) {
      // Python floats take the default dtype (float32), complex numbers
      // complex64, ints int64, bools bool.
      DType t = a->kind == Arg::Kind::Scalar ? a->scalar_kind : a->tensor.dtype();
      if (is_float(t)) t = DType::F32;
      if (is_complex(t)) t = DType::C64;
      update(wrapped, t);
    } else if (a->is_tensor()) {
      update(a->tensor.rank() == 0 ? zero : dim, a->tensor.dtype());
    }
  }
  std::optional<DType> low = zero || wrapped ? std::optional<DType>(combine_categories(zero, wrapped))
                                             : std::nullopt;
  return combine_categories(dim, low);
}

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) { o = s[i]; continue; }
      throw LoweringError("shapes cannot be broadcast together: size " + std::to_string(o) +
                          " vs " + std::to_string(s[i]) + " at dimension " + std::to_string(off + i));
    }
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    throw LoweringError("Dimension out of range (expected to be in range of [" + std::to_string(-r) +
                        ", " + std::to_string(r - 1) + "], but got " + std::to_string(dim) + ")");
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (auto d : dims) out.push_back(wrap_dim(d, rank));
  return out;
}

Value convert_dtype(Builder& b, Value x, DType t) {
  if (t != DType::F8E4M3FN || x.dtype() == t || x.dtype() == DType::Pred) return b.convert(x, t);
  const DType via = x.dtype() == DType::F64 || x.dtype() == DType::F32 ? x.dtype() : DType::F32;
  Value wide = b.convert(x, via);
  constexpr double kMax = 448.0;  // the largest finite float8_e4m3fn
  wide = b.clamp(b.constant(-kMax, via, wide.shape()), wide, b.constant(kMax, via, wide.shape()));
  return b.convert(wide, t);
}

Value cast_to(Builder& b, Value x, DType t, const Shape& shape) {
  return b.broadcast_to(convert_dtype(b, x, t), shape);
}

Value full(Builder& b, double v, DType t, const Shape& shape) { return b.constant(v, t, shape); }

Value full_like(Builder& b, Value like, double v) { return b.constant(v, like.dtype(), like.shape()); }

Value elementwise(Builder& b, const std::vector<const Arg*>& args, const Type& out,
                  const ElementFn& f, DType compute) {
  Values xs;
  for (const Arg* a : args) xs.push_back(cast_to(b, a->value(), compute, out.shape));
  return b.convert(f(b, xs), out.dtype);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

double host_scalar(const Arg& a) {
  if (a.kind == Arg::Kind::Int) return static_cast<double>(a.i);
  if (a.kind == Arg::Kind::Double) return a.d;
  if (a.scalar_kind == DType::F64) return a.d;
  if (a.scalar_kind == DType::Pred) return a.b ? 1 : 0;
  return static_cast<double>(a.i);
}

}  // namespace tt::lowering

// ---- reductions and matmul -------------------------------------------------------
#include <limits>

namespace tt::lowering {

namespace {
std::atomic<int> g_matmul_precision{0};
}

void set_matmul_precision(MatmulPrecision p) { g_matmul_precision = static_cast<int>(p); }

std::string matmul_precision() {
  switch (static_cast<MatmulPrecision>(g_matmul_precision.load())) {
    case MatmulPrecision::High: return "HIGH";
    case MatmulPrecision::Medium: return "DEFAULT";
    default: return "HIGHEST";
  }
}

Value mxu_operand(Builder& b, Value x) {
  if (x.dtype() != DType::F32 || static_cast<MatmulPrecision>(g_matmul_precision.load()) != MatmulPrecision::Medium)
    return x;
  return b.emit1("stablehlo.reduce_precision", {x}, x.type, "exponent_bits = 8 : i32, mantissa_bits = 7 : i32");
}

DType compute_dtype(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

std::vector<int64_t> reduction_dims(const Arg& dim, int64_t rank) {
  std::vector<int64_t> dims;
  if (dim.kind == Arg::Kind::Int) {
    dims.push_back(wrap_dim(dim.i, rank));
  } else if (dim.kind == Arg::Kind::IntList && !dim.ints.empty()) {
    dims = wrap_dims(dim.ints, rank);
  } else {
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
  }
  if (rank == 0) return {};
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

Value reduce_sum(Builder& b, Value x, const std::vector<int64_t>& dims) {
  if (x.dtype() == DType::Pred) return b.reduce(x, b.constant_int(0, DType::Pred), dims, "stablehlo.or");
  return b.reduce(x, b.constant(0, x.dtype()), dims, "stablehlo.add");
}

Value extreme_identity(Builder& b, DType t, bool for_max) {
  if (hlo::is_float(t)) {
    double inf = std::numeric_limits<double>::infinity();
    return b.constant(for_max ? -inf : inf, t);
  }
  if (t == DType::Pred) return b.constant_int(for_max ? 0 : 1, t);
  int w = hlo::bit_width(t);
  if (hlo::is_unsigned(t)) {
    if (for_max) return b.constant_int(0, t);
    uint64_t m = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
    return b.constant_int(static_cast<int64_t>(m), t);
  }
  int64_t hi = w == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (w - 1)) - 1;
  return b.constant_int(for_max ? -hi - 1 : hi, t);
}

// max/min reductions; floats propagate NaN explicitly (XLA's CPU reduce of
// stablehlo.maximum does not).
static Value reduce_extreme(Builder& b, Value x, const std::vector<int64_t>& dims, bool for_max) {
  if (x.dtype() == DType::Pred)
    return b.reduce(x, extreme_identity(b, x.dtype(), for_max), dims, for_max ? "stablehlo.or" : "stablehlo.and");
  if (!hlo::is_float(x.dtype()))
    return b.reduce(x, extreme_identity(b, x.dtype(), for_max), dims,
                    for_max ? "stablehlo.maximum" : "stablehlo.minimum");
  return b.reduce(Values{x}, Values{extreme_identity(b, x.dtype(), for_max)}, dims,
                  [for_max](Builder& b, const Values& v) {
                    Value l = v[0], r = v[1];
                    Value m = for_max ? b.max(l, r) : b.min(l, r);
                    m = b.select(b.compare(r, r, hlo::Cmp::NE), r, m);
                    return Values{b.select(b.compare(l, l, hlo::Cmp::NE), l, m)};
                  })[0];
}

Value reduce_max(Builder& b, Value x, const std::vector<int64_t>& dims) { return reduce_extreme(b, x, dims, true); }

Value reduce_min(Builder& b, Value x, const std::vector<int64_t>& dims) { return reduce_extreme(b, x, dims, false); }

Value expand_reduced(Builder& b, Value reduced, const Shape& full, const std::vector<int64_t>& dims) {
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < static_cast<int64_t>(full.size()); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) keep.push_back(i);
  return b.broadcast_in_dim(reduced, full, keep);
}

}  // namespace tt::lowering
