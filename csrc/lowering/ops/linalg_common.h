// Building blocks shared by the linear-algebra rule files (linalg_lu.cpp,
// linalg_qr.cpp, linalg_eig_svd.cpp): batch flattening, identity and
// triangle masks, batched matmul at full f32 precision, triangular solves,
// row permutations and partial-pivoting LU with its solve.
//
// Matrices here are [B, m, n] with one flattened batch dim; rules flatten
// their leading dims with flatten_batch and restore them at the end.
// Decompositions always multiply at HIGHEST precision: their accuracy does
// not follow torch.get_float32_matmul_precision() (PyTorch's own LAPACK
// paths do not either).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "lowering/helpers.h"

namespace tt::lowering::linalg {

using hlo::Cmp;

// f16/bf16 compute in f32.

inline Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

inline Shape with_matrix(Shape batch, int64_t r, int64_t c) {
  batch.push_back(r);
  batch.push_back(c);
  return batch;
}

// [*, r, c] -> [prod(*), r, c].
inline Value flatten_batch(Builder& b, Value x) {
  int64_t r = x.shape()[x.rank() - 2], c = x.shape()[x.rank() - 1];
  return b.reshape(x, {numel(batch_of(x.shape())), r, c});
}

// The last two dims swapped.
inline Value mT(Builder& b, Value x) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

// (col - row) of every element of the trailing matrices, as i32.
inline Value diag_offset(Builder& b, const Shape& s) {
  Type it{DType::S32, s};
  int64_t r = static_cast<int64_t>(s.size());
  return b.sub(b.iota(it, r - 1), b.iota(it, r - 2));
}

// tril(x, k) / triu(x, k).
inline Value tril(Builder& b, Value x, int64_t k = 0) {
  Value keep = b.compare(diag_offset(b, x.shape()), b.constant_int(k, DType::S32, x.shape()), Cmp::LE);
  return b.select(keep, x, b.constant(0, x.dtype(), x.shape()));
}
inline Value triu(Builder& b, Value x, int64_t k = 0) {
  Value keep = b.compare(diag_offset(b, x.shape()), b.constant_int(k, DType::S32, x.shape()), Cmp::GE);
  return b.select(keep, x, b.constant(0, x.dtype(), x.shape()));
}

// The identity (ones where row == col) of shape `s` ([*, m, n]).
inline Value eye(Builder& b, DType t, const Shape& s) {
  Value on = b.compare(diag_offset(b, s), b.constant_int(0, DType::S32, s), Cmp::EQ);
  return b.convert(on, t);
}

// The diagonal of [B, n, n] as [B, n] (a masked sum; the rest adds zeros).
inline Value diagonal(Builder& b, Value x) {
  Value on = b.compare(diag_offset(b, x.shape()), b.constant_int(0, DType::S32, x.shape()), Cmp::EQ);
  return reduce_sum(b, b.select(on, x, b.constant(0, x.dtype(), x.shape())), {x.rank() - 1});
}

// x @ y over equal leading batch dims, accumulated in x's dtype.
inline Value matmul(Builder& b, Value x, Value y) {
  std::vector<int64_t> batch;
  for (int64_t i = 0; i + 2 < x.rank(); ++i) batch.push_back(i);
  int64_t r = x.rank();
  return b.dot_general(x, y, batch, batch, {r - 1}, {r - 2}, x.dtype(), "HIGHEST");
}

// X with op(A) X = B (left) or X op(A) = B; A is [*, n, n] and only its
// `lower`/upper triangle is read (the rest is masked here so that no
// backend has to promise to ignore it).
inline Value tri_solve(Builder& b, Value a, Value rhs, bool left, bool lower, bool unit, bool transpose) {
  a = lower ? tril(b, a) : triu(b, a);
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                      ", unit_diagonal = " + (unit ? "true" : "false") + ", transpose_a = #stablehlo<transpose " +
                      (transpose ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.emit1("stablehlo.triangular_solve", {a, rhs}, rhs.type, attrs);
}

// out[b, i, :] = x[b, rows[b, i], :] for x [B, m, n] and rows [B, k] (i32).
inline Value gather_rows(Builder& b, Value x, Value rows) {
  int64_t B = x.shape()[0], m = x.shape()[1], n = x.shape()[2], k = rows.shape()[1];
  Value base = b.mul(b.iota(Type{DType::S32, {B, k}}, 0), b.constant_int(m, DType::S32, {B, k}));
  Value idx = b.reshape(b.add(rows, base), {B * k, 1});
  Builder::GatherDims dn;
  dn.offset_dims = {1};
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  Value g = b.gather(b.reshape(x, {B * m, n}), idx, dn, {1, n}, {B * k, n});
  return b.reshape(g, {B, k, n});
}

// The inverse of a permutation [B, m] (i32): inv[perm[i]] = i.
inline Value inverse_perm(Builder& b, Value perm) {
  int64_t B = perm.shape()[0], m = perm.shape()[1];
  Shape s{B, m, m};
  Value hit = b.compare(b.broadcast_in_dim(perm, s, {0, 2}), b.iota(Type{DType::S32, s}, 1), Cmp::EQ);
  Value i = b.iota(Type{DType::S32, s}, 2);
  return reduce_sum(b, b.select(hit, i, b.constant_int(0, DType::S32, s)), {2});
}

// One entry of each row of x [B, m] at column idx [B] (i32), as [B].
inline Value pick(Builder& b, Value x, Value idx) {
  const Shape& s = x.shape();
  Value hit = b.compare(b.iota(Type{DType::S32, s}, 1), b.broadcast_in_dim(idx, s, {0}), Cmp::EQ);
  return reduce_sum(b, b.select(hit, x, b.constant_int(0, x.dtype(), s)), {1});
}

// A 0-d i32 loop counter compared with a bound.
inline Value counter_below(Builder& b, Value j, int64_t bound) {
  return b.compare(j, b.constant_int(bound, DType::S32), Cmp::LT);
}
inline Value next(Builder& b, Value j) { return b.add(j, b.constant_int(1, DType::S32)); }

// The row order that LAPACK's sequential row interchanges (1-based pivots
// [B, k], i32) produce on 0..m-1: A[perm] = L U.
inline Value perm_from_pivots(Builder& b, Value piv, int64_t m) {
  int64_t B = piv.shape()[0], k = piv.shape()[1];
  Value perm = b.iota(Type{DType::S32, {B, m}}, 1);
  if (k == 0 || B == 0 || m == 0) return perm;
  Values r = b.while_loop(
      {perm, piv, b.constant_int(0, DType::S32)},
      [k](Builder& bb, const Values& s) { return Values{counter_below(bb, s[2], k)}; },
      [B, m, k](Builder& bb, const Values& s) {
        Value perm = s[0], piv = s[1], j = s[2];
        Value z = bb.constant_int(0, DType::S32);
        Value p = bb.reshape(bb.dynamic_slice(piv, {z, j}, {B, 1}), {B});
        p = bb.clamp(bb.constant_int(0, DType::S32, {B}), bb.sub(p, bb.constant_int(1, DType::S32, {B})),
                     bb.constant_int(m - 1, DType::S32, {B}));
        Value jb = bb.broadcast_in_dim(j, {B}, {});
        Value at_j = pick(bb, perm, jb), at_p = pick(bb, perm, p);
        Value col = bb.iota(Type{DType::S32, {B, m}}, 1);
        Value is_j = bb.compare(col, bb.broadcast_in_dim(jb, {B, m}, {0}), Cmp::EQ);
        Value is_p = bb.compare(col, bb.broadcast_in_dim(p, {B, m}, {0}), Cmp::EQ);
        perm = bb.select(is_j, bb.broadcast_in_dim(at_p, {B, m}, {0}),
                         bb.select(is_p, bb.broadcast_in_dim(at_j, {B, m}, {0}), perm));
        return Values{perm, piv, next(bb, j)};
      });
  return r[0];
}

struct LU {
  Value lu;     // [B, m, n]: unit-lower L below the diagonal, U on and above
  Value piv;    // [B, k] i32, 1-based, as LAPACK's getrf
  Value perm;   // [B, m] i32: A[perm] = L U
  Value info;   // [B] i32: 0, or the 1-based index of the first zero pivot
};

// Partial-pivoting LU of A [B, m, n] (right-looking, one column per while
// step). The pivot is the first row of largest magnitude, as LAPACK's
// idamax picks it; a zero column is not swapped and sets info, as getrf.
inline LU lu_factor(Builder& b, Value A) {
  int64_t B = A.shape()[0], m = A.shape()[1], n = A.shape()[2], k = std::min(m, n);
  LU out;
  out.piv = b.constant_int(0, DType::S32, {B, k});
  out.perm = b.iota(Type{DType::S32, {B, m}}, 1);
  out.info = b.constant_int(0, DType::S32, {B});
  out.lu = A;
  if (B == 0 || k == 0) {
    out.piv = b.add(b.iota(Type{DType::S32, {B, k}}, 1), b.constant_int(1, DType::S32, {B, k}));
    return out;
  }
  DType t = A.dtype();
  Values r = b.while_loop(
      {A, out.piv, out.perm, out.info, b.constant_int(0, DType::S32)},
      [k](Builder& bb, const Values& s) { return Values{counter_below(bb, s[4], k)}; },
      [B, m, n, t](Builder& bb, const Values& s) {
        Value A = s[0], piv = s[1], perm = s[2], info = s[3], j = s[4];
        Shape s3{B, m, n}, s2{B, m};
        Value z = bb.constant_int(0, DType::S32);
        Value row2 = bb.iota(Type{DType::S32, s2}, 1);
        Value row3 = bb.iota(Type{DType::S32, s3}, 1), col3 = bb.iota(Type{DType::S32, s3}, 2);
        Value j2 = bb.broadcast_in_dim(j, s2, {}), j3 = bb.broadcast_in_dim(j, s3, {});
        Value jb = bb.broadcast_in_dim(j, {B}, {});
        // Pivot: the first row >= j of largest |A[:, j]|.
        Value col = bb.reshape(bb.dynamic_slice(A, {z, z, j}, {B, m, 1}), s2);
        // A complex entry's size is |re| + |im|, as LAPACK's izamax measures it.
        Value size = hlo::is_complex(t) ? bb.add(bb.abs(bb.real(col)), bb.abs(bb.imag(col))) : bb.abs(col);
        Value mag = bb.select(bb.compare(row2, j2, Cmp::GE), size, bb.constant(-1, hlo::real_dtype(t), s2));
        Value mx = reduce_max(bb, mag, {1});
        Value is_max = bb.compare(mag, bb.broadcast_in_dim(mx, s2, {0}), Cmp::EQ);
        Value p = reduce_min(bb, bb.select(is_max, row2, bb.constant_int(m, DType::S32, s2)), {1});
        // A NaN column has no maximum: keep row j, as idamax would not move either.
        p = bb.select(bb.compare(p, bb.constant_int(m, DType::S32, {B}), Cmp::GE), jb, p);
        Value p3 = bb.broadcast_in_dim(p, s3, {0}), p2 = bb.broadcast_in_dim(p, s2, {0});
        // Swap rows j and p of A and of perm.
        Value is_j3 = bb.compare(row3, j3, Cmp::EQ), is_p3 = bb.compare(row3, p3, Cmp::EQ);
        Value row_j = bb.broadcast_in_dim(bb.dynamic_slice(A, {z, j, z}, {B, 1, n}), s3, {0, 1, 2});
        Value row_p = bb.broadcast_in_dim(reduce_sum(bb, bb.select(is_p3, A, bb.constant(0, t, s3)), {1}), s3, {0, 2});
        A = bb.select(is_j3, row_p, bb.select(is_p3, row_j, A));
        Value is_j2 = bb.compare(row2, j2, Cmp::EQ), is_p2 = bb.compare(row2, p2, Cmp::EQ);
        Value perm_j = bb.broadcast_in_dim(pick(bb, perm, jb), s2, {0});
        Value perm_p = bb.broadcast_in_dim(pick(bb, perm, p), s2, {0});
        perm = bb.select(is_j2, perm_p, bb.select(is_p2, perm_j, perm));
        piv = bb.dynamic_update_slice(piv, bb.reshape(bb.add(p, bb.constant_int(1, DType::S32, {B})), {B, 1}), {z, j});
        // Eliminate below the pivot: multipliers l = A[:, j] / d, then the
        // trailing block loses l * (pivot row).
        Value pivot_row = bb.broadcast_in_dim(bb.dynamic_slice(A, {z, j, z}, {B, 1, n}), s3, {0, 1, 2});
        Value col_j = bb.broadcast_in_dim(bb.dynamic_slice(A, {z, z, j}, {B, m, 1}), s3, {0, 1, 2});
        Value d1 = bb.reshape(bb.dynamic_slice(A, {z, j, j}, {B, 1, 1}), {B});
        Value d = bb.broadcast_in_dim(d1, s3, {0});
        Value nonzero = bb.compare(d, bb.constant(0, t, s3), Cmp::NE);
        Value l = bb.select(nonzero, bb.div(col_j, d), col_j);
        Value below = bb.compare(row3, j3, Cmp::GT);
        Value right = bb.compare(col3, j3, Cmp::GT), at_col = bb.compare(col3, j3, Cmp::EQ);
        Value updated = bb.sub(A, bb.mul(l, pivot_row));
        A = bb.select(bb.and_(below, right), updated, bb.select(bb.and_(below, at_col), l, A));
        Value first_zero = bb.and_(bb.compare(info, bb.constant_int(0, DType::S32, {B}), Cmp::EQ),
                                   bb.compare(d1, bb.constant(0, t, {B}), Cmp::EQ));
        info = bb.select(first_zero, bb.add(jb, bb.constant_int(1, DType::S32, {B})), info);
        return Values{A, piv, perm, info, next(bb, j)};
      });
  out.lu = r[0];
  out.piv = r[1];
  out.perm = r[2];
  out.info = r[3];
  return out;
}

// X with A X = rhs (or A^T X = rhs when `adjoint`), given A's LU [B, n, n]
// and row order perm [B, n]; rhs is [B, n, r].
inline Value lu_solve(Builder& b, Value lu, Value perm, Value rhs, bool adjoint) {
  if (numel(rhs.shape()) == 0) return rhs;
  Value L = b.add(tril(b, lu, -1), eye(b, lu.dtype(), lu.shape()));
  if (!adjoint) {  // L U X = rhs[perm]
    Value y = tri_solve(b, L, gather_rows(b, rhs, perm), true, true, true, false);
    return tri_solve(b, lu, y, true, false, false, false);
  }
  // U^T L^T P^T X = rhs: X = P (L^-T U^-T rhs).
  Value y = tri_solve(b, lu, rhs, true, false, false, true);
  y = tri_solve(b, L, y, true, true, true, true);
  return gather_rows(b, y, inverse_perm(b, perm));
}

// sqrt(sum(x^2)) over dim 1 of x [B, m], scaled by the largest |x| so that
// it neither overflows nor underflows (as LAPACK's nrm2).
inline Value norm2(Builder& b, Value x) {
  const Shape& s = x.shape();
  DType t = x.dtype();
  Value big = reduce_max(b, b.abs(x), {1});
  Value zero = b.compare(big, b.constant(0, t, big.shape()), Cmp::EQ);
  Value safe = b.select(zero, b.constant(1, t, big.shape()), big);
  Value y = b.div(x, b.broadcast_in_dim(safe, s, {0}));
  return b.mul(safe, b.sqrt(reduce_sum(b, b.mul(y, y), {1})));
}

// sqrt(x^2 + y^2) for [B] values, scaled likewise.
inline Value hypot(Builder& b, Value x, Value y) {
  return norm2(b, b.concatenate({b.reshape(x, {x.shape()[0], 1}), b.reshape(y, {y.shape()[0], 1})}, 1));
}

struct Householder {
  Value a;    // [B, m, n]: R on and above the diagonal, reflectors below
  Value tau;  // [B, k]
};

// Householder QR of A [B, m, n] in LAPACK's geqrf representation: column j
// is reduced by H_j = I - tau_j v_j v_j^T with v_j[j] = 1 (implicit),
// v_j[j+1:] stored below the diagonal, and beta = -sign(alpha) ||x|| on it
// (LAPACK's larfg: a column already zero below the diagonal gets tau = 0).
inline Householder householder_qr(Builder& b, Value A) {
  int64_t B = A.shape()[0], m = A.shape()[1], n = A.shape()[2], k = std::min(m, n);
  DType t = A.dtype();
  Value tau = b.constant(0, t, {B, k});
  if (B == 0 || k == 0) return {A, tau};
  Values r = b.while_loop(
      {A, tau, b.constant_int(0, DType::S32)},
      [k](Builder& bb, const Values& s) { return Values{counter_below(bb, s[2], k)}; },
      [B, m, n, t](Builder& bb, const Values& s) {
        Value A = s[0], tau = s[1], j = s[2];
        Shape s3{B, m, n}, s2{B, m};
        Value z = bb.constant_int(0, DType::S32);
        Value row2 = bb.iota(Type{DType::S32, s2}, 1);
        Value row3 = bb.iota(Type{DType::S32, s3}, 1), col3 = bb.iota(Type{DType::S32, s3}, 2);
        Value j2 = bb.broadcast_in_dim(j, s2, {}), j3 = bb.broadcast_in_dim(j, s3, {});
        Value col = bb.reshape(bb.dynamic_slice(A, {z, z, j}, {B, m, 1}), s2);
        Value below = bb.compare(row2, j2, Cmp::GT), at_j = bb.compare(row2, j2, Cmp::EQ);
        Value x = bb.select(below, col, bb.constant(0, t, s2));
        Value alpha = reduce_sum(bb, bb.select(at_j, col, bb.constant(0, t, s2)), {1});
        Value xnorm = norm2(bb, x);
        Value nrm = hypot(bb, alpha, xnorm);
        Value beta = bb.select(bb.compare(alpha, bb.constant(0, t, {B}), Cmp::GE), bb.neg(nrm), nrm);
        Value trivial = bb.compare(xnorm, bb.constant(0, t, {B}), Cmp::EQ);
        Value one = bb.constant(1, t, {B});
        Value tau_j = bb.select(trivial, bb.constant(0, t, {B}), bb.div(bb.sub(beta, alpha), bb.select(trivial, one, beta)));
        Value denom = bb.select(trivial, one, bb.sub(alpha, beta));
        Value v = bb.select(below, bb.div(x, bb.broadcast_in_dim(denom, s2, {0})),
                            bb.select(at_j, bb.constant(1, t, s2), bb.constant(0, t, s2)));
        // The trailing columns: A -= tau v (v^T A).
        Value w = bb.dot_general(v, A, {0}, {0}, {1}, {1}, t, "HIGHEST");  // [B, n]
        Value tv = bb.mul(v, bb.broadcast_in_dim(tau_j, s2, {0}));
        Value upd = bb.sub(A, bb.mul(bb.broadcast_in_dim(tv, s3, {0, 1}), bb.broadcast_in_dim(w, s3, {0, 2})));
        A = bb.select(bb.compare(col3, j3, Cmp::GT), upd, A);
        // Column j: beta on the diagonal, the reflector below.
        Value newcol = bb.select(at_j, bb.broadcast_in_dim(beta, s2, {0}), v);
        newcol = bb.select(bb.broadcast_in_dim(trivial, s2, {0}), col, newcol);
        Value here = bb.and_(bb.compare(col3, j3, Cmp::EQ), bb.compare(row3, j3, Cmp::GE));
        A = bb.select(here, bb.broadcast_in_dim(newcol, s3, {0, 1}), A);
        tau = bb.dynamic_update_slice(tau, bb.reshape(tau_j, {B, 1}), {z, j});
        return Values{A, tau, next(bb, j)};
      });
  return {r[0], r[1]};
}

// Q C (or Q^T C when `transpose`) for Q = H_0 H_1 ... H_{k-1} given by the
// reflectors in V [B, m, >=k] (below the diagonal) and tau [B, k]; C is
// [B, m, r].
inline Value apply_q(Builder& b, Value V, Value tau, Value C, bool transpose) {
  int64_t B = V.shape()[0], m = V.shape()[1], k = tau.shape()[1], r = C.shape()[2];
  if (k == 0 || numel(C.shape()) == 0) return C;
  DType t = C.dtype();
  Values res = b.while_loop(
      {C, V, tau, b.constant_int(0, DType::S32)},
      [k](Builder& bb, const Values& s) { return Values{counter_below(bb, s[3], k)}; },
      [B, m, k, r, t, transpose](Builder& bb, const Values& s) {
        Value C = s[0], V = s[1], tau = s[2], i = s[3];
        // Q C applies H_{k-1} first; Q^T C applies H_0 first.
        Value j = transpose ? i : bb.sub(bb.constant_int(k - 1, DType::S32), i);
        Shape s2{B, m}, s3{B, m, r};
        Value z = bb.constant_int(0, DType::S32);
        Value row2 = bb.iota(Type{DType::S32, s2}, 1), j2 = bb.broadcast_in_dim(j, s2, {});
        Value col = bb.reshape(bb.dynamic_slice(V, {z, z, j}, {B, m, 1}), s2);
        Value v = bb.select(bb.compare(row2, j2, Cmp::GT), col,
                            bb.select(bb.compare(row2, j2, Cmp::EQ), bb.constant(1, t, s2), bb.constant(0, t, s2)));
        Value tj = bb.reshape(bb.dynamic_slice(tau, {z, j}, {B, 1}), {B});
        Value w = bb.dot_general(v, C, {0}, {0}, {1}, {1}, t, "HIGHEST");  // [B, r]
        Value tv = bb.mul(v, bb.broadcast_in_dim(tj, s2, {0}));
        C = bb.sub(C, bb.mul(bb.broadcast_in_dim(tv, s3, {0, 1}), bb.broadcast_in_dim(w, s3, {0, 2})));
        return Values{C, V, tau, next(bb, i)};
      });
  return res[0];
}

}  // namespace tt::lowering::linalg
