// Linear algebra that StableHLO has ops for: Cholesky factorisation
// (linalg_cholesky_ex, cholesky), triangular solves (linalg_solve_triangular,
// triangular_solve) and what they compose into (cholesky_solve's helper,
// cholesky_inverse). f16/bf16 compute in f32.
// QR, SVD, eigen-decompositions and LU have no StableHLO op (XLA calls
// LAPACK for them through custom calls the PJRT plugins do not share); they
// still run on the CPU.
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;


// The last two dims swapped.
Value mT(Builder& b, Value x) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

// Keeps the lower (or upper) triangle of the trailing matrices, zeroing the rest.
Value triangle(Builder& b, Value x, bool lower) {
  Type it{DType::S64, x.shape()};
  Value r = b.iota(it, x.rank() - 2), col = b.iota(it, x.rank() - 1);
  Value keep = b.compare(col, r, lower ? Cmp::LE : Cmp::GE);
  return b.select(keep, x, b.constant(0, x.dtype(), x.shape()));
}

// `x` ([*, r, c]) broadcast to batch dims `batch` + its own matrix dims.
Value batch_to(Builder& b, Value x, Shape batch, DType t) {
  batch.push_back(x.shape()[x.rank() - 2]);
  batch.push_back(x.shape()[x.rank() - 1]);
  return cast_to(b, x, t, batch);
}

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// X with op(A) X = B (left) or X op(A) = B; A is [*, n, n] triangular.
Value tri_solve(Builder& b, Value a, Value rhs, bool left, bool lower, bool unit, bool transpose) {
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                      ", unit_diagonal = " + (unit ? "true" : "false") + ", transpose_a = #stablehlo<transpose " +
                      (transpose ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.emit1("stablehlo.triangular_solve", {a, rhs}, rhs.type, attrs);
}

// The lower Cholesky factor, with the upper triangle zeroed.
Value cholesky_lower(Builder& b, Value a) {
  return triangle(b, b.emit1("stablehlo.cholesky", {a}, a.type, "lower = true"), true);
}

// linalg_solve_triangular(A, B, *, upper, left, unitriangular)
TT_RULE({"aten::linalg_solve_triangular"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Shape batch = batch_of(out.shape);
  Value A = batch_to(b, a[0].value(), batch, ct), B = cast_to(b, a[1].value(), ct, out.shape);
  bool upper = a[2].b, left = a[3].b, unit = a[4].b;
  if (numel(out.shape) == 0) return Values{b.convert(B, out.dtype)};
  return Values{b.convert(tri_solve(b, A, B, left, !upper, unit, false), out.dtype)};
});

// triangular_solve(B, A, upper, transpose, unitriangular) -> (X, A)
TT_RULE({"aten::triangular_solve"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& xo = c.out(0);
  const Type& ao = c.out(1);
  DType ct = compute_dtype(xo.dtype);
  Value B = cast_to(b, a[0].value(), ct, xo.shape), A = cast_to(b, a[1].value(), ct, ao.shape);
  bool upper = a[2].b, transpose = a[3].b, unit = a[4].b;
  Value X = numel(xo.shape) ? tri_solve(b, A, B, true, !upper, unit, transpose) : B;
  return Values{b.convert(X, xo.dtype), b.convert(A, ao.dtype)};
});

// info as LAPACK reports it: 0, or the 1-based order of the first leading
// minor that is not positive definite (the first NaN on L's diagonal).
Value cholesky_info(Builder& b, Value L, const Type& info_t) {
  int64_t n = L.shape().back();
  Type it{DType::S64, L.shape()};
  Value diag = b.compare(b.iota(it, L.rank() - 2), b.iota(it, L.rank() - 1), Cmp::EQ);
  Value bad = b.and_(diag, b.compare(L, L, Cmp::NE));
  Value pos = b.select(bad, b.iota(it, L.rank() - 1), b.constant_int(n, DType::S64, L.shape()));
  Value first = reduce_min(b, pos, {L.rank() - 2, L.rank() - 1});
  Value none = b.compare(first, b.constant_int(n, DType::S64, first.shape()), Cmp::EQ);
  Value info = b.select(none, b.constant_int(0, DType::S64, first.shape()),
                        b.add(first, b.constant_int(1, DType::S64, first.shape())));
  return b.reshape(b.convert(info, info_t.dtype), info_t.shape);
}

// linalg_cholesky_ex(A, upper, check_errors) -> (L, info)
TT_RULE({"aten::linalg_cholesky_ex"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& lo = c.out(0);
  Value A = b.convert(a[0].value(), compute_dtype(lo.dtype));
  if (numel(lo.shape) == 0) return Values{b.convert(A, lo.dtype), b.constant_int(0, c.out(1).dtype, c.out(1).shape)};
  Value L = cholesky_lower(b, A);
  Value info = cholesky_info(b, L, c.out(1));
  if (a[1].b) L = mT(b, L);
  return Values{b.convert(L, lo.dtype), info};
});

// cholesky(A, upper) (deprecated)
TT_RULE({"aten::cholesky"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& lo = c.out();
  Value A = b.convert(a[0].value(), compute_dtype(lo.dtype));
  if (numel(lo.shape) == 0) return Values{b.convert(A, lo.dtype)};
  Value L = cholesky_lower(b, A);
  bool upper = a.size() > 1 && a[1].b;
  return Values{b.convert(upper ? mT(b, L) : L, lo.dtype)};
});

// Solves (L L^T) X = B given the factor (lower L, or upper U = L^T).
Value cholesky_solve_with(Builder& b, Value F, Value B, bool upper) {
  if (upper) {  // U^T U X = B: U^T Y = B, then U X = Y
    Value Y = tri_solve(b, F, B, true, false, false, true);
    return tri_solve(b, F, Y, true, false, false, false);
  }
  Value Y = tri_solve(b, F, B, true, true, false, false);
  return tri_solve(b, F, Y, true, true, false, true);
}

// _cholesky_solve_helper(B, factor, upper): batch dims already broadcast.
TT_RULE({"aten::_cholesky_solve_helper"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value B = cast_to(b, a[0].value(), ct, out.shape);
  Value F = batch_to(b, a[1].value(), batch_of(out.shape), ct);
  if (numel(out.shape) == 0) return Values{b.convert(B, out.dtype)};
  return Values{b.convert(cholesky_solve_with(b, F, B, a[2].b), out.dtype)};
});

// cholesky_inverse(factor, upper): (L L^T)^-1.
TT_RULE({"aten::cholesky_inverse"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value F = b.convert(a[0].value(), ct);
  if (numel(out.shape) == 0) return Values{b.convert(F, out.dtype)};
  Type it{DType::S64, out.shape};
  Value eye = b.convert(b.compare(b.iota(it, out.rank() - 2), b.iota(it, out.rank() - 1), Cmp::EQ), ct);
  bool upper = a.size() > 1 && a[1].b;
  // Only the factor's own triangle is read, as LAPACK does.
  F = triangle(b, F, !upper);
  return Values{b.convert(cholesky_solve_with(b, F, eye, upper), out.dtype)};
});

}  // namespace
}  // namespace tt::lowering
