// Symmetric eigen-decomposition (_linalg_eigh) by cyclic Jacobi rotations
// and the singular value decomposition (_linalg_svd) by one-sided
// (Hestenes) Jacobi; least squares (linalg_lstsq) on top of them and QR.
//
// Both Jacobi methods rotate n/2 disjoint index pairs at once: the pairs are
// always rows (2i, 2i+1) of the working matrices, and between rounds the
// matrices are re-ordered by the round-robin ("tournament") permutation, so
// that n-1 rounds meet every pair once (a sweep). Sweeps repeat in a
// stablehlo.while until the off-diagonal part is at rounding level. An odd
// n is padded with one decoupled index that is dropped at the end.
//
// Eigen/singular vectors are unique only up to sign; these need not pick
// LAPACK's signs (PyTorch's OpInfo compares them through sign-invariant
// wrappers). Values come out sorted: eigenvalues ascending, singular values
// descending. Batched; f16/bf16 compute in f32.
#include <cmath>
#include <limits>

#include "lowering/ops/linalg_common.h"

namespace tt::lowering {
namespace {

using namespace linalg;

constexpr int64_t kMaxSweeps = 40;

double epsilon(DType t) {
  return t == DType::F64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

// The round-robin re-ordering for n (even) positions, as gather rows [B, n]:
// new[0] = old[0], new[2] = old[1], new[2i] = old[2i-2] (i >= 2),
// new[2i+1] = old[2i+3], new[n-1] = old[n-2].
Value tournament(Builder& b, int64_t B, int64_t n) {
  Shape s{B, n};
  Value x = b.iota(Type{DType::S32, s}, 1);
  auto k = [&](int64_t v) { return b.constant_int(v, DType::S32, s); };
  if (n <= 2) return x;
  Value odd = b.compare(b.and_(x, k(1)), k(0), Cmp::NE);
  Value even_src = b.select(b.compare(x, k(0), Cmp::EQ), k(0),
                            b.select(b.compare(x, k(2), Cmp::EQ), k(1), b.sub(x, k(2))));
  Value odd_src = b.select(b.compare(x, k(n - 1), Cmp::EQ), k(n - 2), b.add(x, k(2)));
  return b.select(odd, odd_src, even_src);
}

// Rows (2i, 2i+1) of X [B, n, r] become (c p - s q, s p + c q); c, s [B, n/2].
Value rotate_pairs(Builder& b, Value X, Value c, Value s) {
  int64_t B = X.shape()[0], n = X.shape()[1], r = X.shape()[2], k = n / 2;
  Value Y = b.reshape(X, {B, k, 2, r});
  Value p = b.reshape(b.slice(Y, {0, 0, 0, 0}, {B, k, 1, r}), {B, k, r});
  Value q = b.reshape(b.slice(Y, {0, 0, 1, 0}, {B, k, 2, r}), {B, k, r});
  Value cb = b.broadcast_in_dim(c, {B, k, r}, {0, 1}), sb = b.broadcast_in_dim(s, {B, k, r}, {0, 1});
  Value p2 = b.sub(b.mul(cb, p), b.mul(sb, q)), q2 = b.add(b.mul(sb, p), b.mul(cb, q));
  Value both = b.concatenate({b.reshape(p2, {B, k, 1, r}), b.reshape(q2, {B, k, 1, r})}, 2);
  return b.reshape(both, {B, n, r});
}

// The Jacobi rotation (c, s) that zeroes apq in [[app, apq], [apq, aqq]]
// (J = [[c, s], [-s, c]], J^T A J diagonal; the smaller of the two angles).
std::pair<Value, Value> jacobi_cs(Builder& b, Value app, Value aqq, Value apq) {
  const Shape& s = apq.shape();
  DType t = apq.dtype();
  auto k = [&](double v) { return b.constant(v, t, s); };
  Value zero = b.compare(apq, k(0), Cmp::EQ);
  Value tau = b.div(b.sub(aqq, app), b.mul(k(2), b.select(zero, k(1), apq)));
  Value sgn = b.select(b.compare(tau, k(0), Cmp::GE), k(1), k(-1));
  Value tt = b.div(sgn, b.add(b.abs(tau), b.sqrt(b.add(k(1), b.mul(tau, tau)))));
  tt = b.select(zero, k(0), tt);
  Value c = b.rsqrt(b.add(k(1), b.mul(tt, tt)));
  return {c, b.mul(tt, c)};
}

// Entry (2i + dr, 2i + dc) of each diagonal 2x2 block of X [B, n, n], as [B, n/2].
Value block_entry(Builder& b, Value X, int64_t dr, int64_t dc) {
  int64_t B = X.shape()[0], n = X.shape()[1], k = n / 2;
  Value rows = b.reshape(b.slice(b.reshape(X, {B, k, 2, n}), {0, 0, dr, 0}, {B, k, dr + 1, n}), {B, k, n});
  Shape s{B, k, n};
  Value want = b.add(b.mul(b.iota(Type{DType::S32, s}, 1), b.constant_int(2, DType::S32, s)),
                     b.constant_int(dc, DType::S32, s));
  Value hit = b.compare(b.iota(Type{DType::S32, s}, 2), want, Cmp::EQ);
  return reduce_sum(b, b.select(hit, rows, b.constant(0, X.dtype(), s)), {2});
}

Value reorder(Builder& b, Value X, Value perm) { return gather_rows(b, X, perm); }

// Rows of X [B, n, r] gathered by idx [B, n] and the first `keep` kept.
Value take_rows(Builder& b, Value X, Value idx, int64_t keep) {
  Value g = gather_rows(b, X, idx);
  return b.slice(g, {0, 0, 0}, {X.shape()[0], keep, X.shape()[2]});
}

// Stable sort of key [B, n] along dim 1 (ascending, or descending); returns
// the source index of each sorted position, i32 [B, n].
Value sort_order(Builder& b, Value key, bool descending) {
  Value idx = b.iota(Type{DType::S32, key.shape()}, 1);
  Values r = b.sort({key, idx}, 1, true, [descending](Builder& bb, const Values& a) {
    return Values{bb.compare(a[0], a[1], descending ? Cmp::GT : Cmp::LT)};
  });
  return r[1];
}

Value sum_squares(Builder& b, Value x) {
  std::vector<int64_t> dims;
  for (int64_t i = 1; i < x.rank(); ++i) dims.push_back(i);
  return reduce_sum(b, b.mul(x, x), dims);
}

Value any(Builder& b, Value pred) { return reduce_sum(b, pred, {0}); }

struct Eigh {
  Value values;   // [B, n] ascending
  Value vectors;  // [B, n, n], eigenvectors as columns
};

// Cyclic Jacobi for a symmetric A [B, n, n].
Eigh jacobi_eigh(Builder& b, Value A) {
  int64_t B = A.shape()[0], n = A.shape()[1];
  DType t = A.dtype();
  if (n == 0 || B == 0) return {b.constant(0, t, {B, n}), b.constant(0, t, {B, n, n})};
  int64_t np = n + (n % 2);
  if (np != n) A = b.pad(A, b.constant(0, t), {0, 0, 0}, {0, 1, 1}, {0, 0, 0});
  Value Vt = eye(b, t, {B, np, np});
  Value orig = b.iota(Type{DType::S32, {B, np, 1}}, 1);
  double tol = epsilon(t) * static_cast<double>(n);
  Value total = sum_squares(b, A);
  Values st = b.while_loop(
      {A, Vt, orig, total, b.constant_int(0, DType::S32), b.constant_int(1, DType::Pred)},
      [](Builder& bb, const Values& s) {
        return Values{bb.and_(counter_below(bb, s[4], kMaxSweeps), s[5])};
      },
      [B, np, t, tol](Builder& bb, const Values& s) {
        Values round = bb.while_loop(
            {s[0], s[1], s[2], bb.constant_int(0, DType::S32)},
            [np](Builder& b2, const Values& r) { return Values{counter_below(b2, r[3], np - 1)}; },
            [B, np](Builder& b2, const Values& r) {
              Value A = r[0], Vt = r[1], orig = r[2];
              auto [c, s] = jacobi_cs(b2, block_entry(b2, A, 0, 0), block_entry(b2, A, 1, 1), block_entry(b2, A, 0, 1));
              A = rotate_pairs(b2, A, c, s);
              A = mT(b2, rotate_pairs(b2, mT(b2, A), c, s));
              // The rotated pairs' off-diagonal entries are zero in exact arithmetic.
              Shape s3{B, np, np};
              Value row = b2.iota(Type{DType::S32, s3}, 1), col = b2.iota(Type{DType::S32, s3}, 2);
              Value two = b2.constant_int(2, DType::S32, s3);
              Value same_pair = b2.and_(b2.compare(b2.div(row, two), b2.div(col, two), Cmp::EQ),
                                        b2.compare(row, col, Cmp::NE));
              A = b2.select(same_pair, b2.constant(0, A.dtype(), s3), A);
              Vt = rotate_pairs(b2, Vt, c, s);
              Value perm = tournament(b2, B, np);
              A = reorder(b2, mT(b2, reorder(b2, A, perm)), perm);  // A[perm][:, perm] (A symmetric)
              Vt = reorder(b2, Vt, perm);
              orig = reorder(b2, orig, perm);
              return Values{A, Vt, orig, next(b2, r[3])};
            });
        Value A = round[0];
        Shape s3{B, np, np};
        Value on_diag = bb.compare(diag_offset(bb, s3), bb.constant_int(0, DType::S32, s3), Cmp::EQ);
        Value off = sum_squares(bb, bb.select(on_diag, bb.constant(0, t, s3), A));
        Value limit = bb.mul(s[3], bb.constant(tol * tol, t, {B}));
        Value more = any(bb, bb.compare(off, limit, Cmp::GT));
        return Values{A, round[1], round[2], s[3], next(bb, s[4]), more};
      });
  Value d = diagonal(b, st[0]);
  Value pad = b.compare(b.reshape(st[2], {B, np}), b.constant_int(n, DType::S32, {B, np}), Cmp::EQ);
  Value key = b.select(pad, b.constant(std::numeric_limits<double>::infinity(), t, {B, np}), d);
  Value order = sort_order(b, key, false);
  Value vals = b.reshape(take_rows(b, b.reshape(d, {B, np, 1}), order, n), {B, n});
  Value vt = take_rows(b, st[1], order, n);
  vt = b.slice(vt, {0, 0, 0}, {B, n, n});
  return {vals, mT(b, vt)};
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors); only the
// UPLO triangle of A is read.
TT_RULE({"aten::_linalg_eigh"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& vo = c.out(0);
  DType ct = compute_dtype(vo.dtype);
  const std::string& uplo = a[1].s;
  if (uplo != "L" && uplo != "U" && uplo != "l" && uplo != "u")
    throw InvalidArgument("Expected UPLO argument to be 'L' or 'U', but got " + uplo);
  bool lower = uplo == "L" || uplo == "l";
  Value A = flatten_batch(b, b.convert(a[0].value(), ct));
  Value T = lower ? tril(b, A) : triu(b, A);
  Value S = b.add(T, mT(b, lower ? tril(b, A, -1) : triu(b, A, 1)));
  Eigh e = jacobi_eigh(b, S);
  Value vals = b.convert(b.reshape(e.values, vo.shape), vo.dtype);
  Value vecs = a[2].b ? b.convert(b.reshape(e.vectors, c.out(1).shape), c.out(1).dtype)
                      : b.constant(0, c.out(1).dtype, c.out(1).shape);
  return Values{vals, vecs};
});

struct Svd {
  Value U;   // [B, m, m] (full) or [B, m, k]
  Value S;   // [B, k], descending
  Value Vh;  // [B, n, n] (full) or [B, k, n]
};

// Columns of Q (Householder QR of X [B, m, k], m >= k) with the signs of R's
// diagonal: X's columns again where X is orthonormal, an orthonormal
// completion where X's columns are zero, and `cols` columns in all.
Value orthonormal_completion(Builder& b, Value X, int64_t cols) {
  int64_t B = X.shape()[0], m = X.shape()[1], k = X.shape()[2];
  DType t = X.dtype();
  Householder h = householder_qr(b, X);
  Value Q = apply_q(b, h.a, h.tau, eye(b, t, {B, m, cols}), false);
  Value d = diagonal(b, b.slice(h.a, {0, 0, 0}, {B, k, k}));  // [B, k]
  Value sign = b.select(b.compare(d, b.constant(0, t, {B, k}), Cmp::LT), b.constant(-1, t, {B, k}),
                        b.constant(1, t, {B, k}));
  if (cols > k) sign = b.concatenate({sign, b.constant(1, t, {B, cols - k})}, 1);
  return b.mul(Q, b.broadcast_in_dim(sign, {B, m, cols}, {0, 2}));
}

// One-sided Jacobi SVD of A [B, m, n] with m >= n: A Q has orthogonal
// columns after enough sweeps; their norms are the singular values.
Svd jacobi_svd_tall(Builder& b, Value A, bool full, bool compute_uv) {
  int64_t B = A.shape()[0], m = A.shape()[1], n = A.shape()[2];
  DType t = A.dtype();
  int64_t np = n + (n % 2);
  Value Ut = mT(b, A);  // [B, n, m]: the working columns as rows
  if (np != n) Ut = b.pad(Ut, b.constant(0, t), {0, 0, 0}, {0, 1, 0}, {0, 0, 0});
  Value Vt = eye(b, t, {B, np, np});
  Value orig = b.iota(Type{DType::S32, {B, np, 1}}, 1);
  double tol = epsilon(t) * std::sqrt(static_cast<double>(std::max<int64_t>(m, 1)));
  Values st = b.while_loop(
      {Ut, Vt, orig, b.constant_int(0, DType::S32), b.constant_int(1, DType::Pred)},
      [](Builder& bb, const Values& s) {
        return Values{bb.and_(counter_below(bb, s[3], kMaxSweeps), s[4])};
      },
      [B, np, t, tol](Builder& bb, const Values& s) {
        Values round = bb.while_loop(
            {s[0], s[1], s[2], bb.constant_int(0, DType::S32)},
            [np](Builder& b2, const Values& r) { return Values{counter_below(b2, r[3], np - 1)}; },
            [B, np](Builder& b2, const Values& r) {
              Value Ut = r[0], Vt = r[1], orig = r[2];
              int64_t k = np / 2, m = Ut.shape()[2];
              Value Y = b2.reshape(Ut, {B, k, 2, m});
              Value p = b2.reshape(b2.slice(Y, {0, 0, 0, 0}, {B, k, 1, m}), {B, k, m});
              Value q = b2.reshape(b2.slice(Y, {0, 0, 1, 0}, {B, k, 2, m}), {B, k, m});
              Value alpha = reduce_sum(b2, b2.mul(p, p), {2}), beta = reduce_sum(b2, b2.mul(q, q), {2});
              Value gamma = reduce_sum(b2, b2.mul(p, q), {2});
              auto [c, s] = jacobi_cs(b2, alpha, beta, gamma);
              Ut = rotate_pairs(b2, Ut, c, s);
              Vt = rotate_pairs(b2, Vt, c, s);
              Value perm = tournament(b2, B, np);
              return Values{reorder(b2, Ut, perm), reorder(b2, Vt, perm), reorder(b2, orig, perm), next(b2, r[3])};
            });
        // Converged when every pair of columns is orthogonal to rounding.
        Value Ut = round[0];
        Value G = matmul(bb, Ut, mT(bb, Ut));
        Value d = diagonal(bb, G);
        Shape s3{B, np, np};
        Value scale = bb.mul(bb.broadcast_in_dim(d, s3, {0, 1}), bb.broadcast_in_dim(d, s3, {0, 2}));
        Value off = bb.compare(diag_offset(bb, s3), bb.constant_int(0, DType::S32, s3), Cmp::NE);
        Value bad = bb.and_(off, bb.compare(bb.mul(G, G), bb.mul(scale, bb.constant(tol * tol, t, s3)), Cmp::GT));
        Value more = reduce_sum(bb, bad, {0, 1, 2});
        return Values{Ut, round[1], round[2], next(bb, s[3]), more};
      });
  Value Uw = st[0];
  // Singular values: the row norms of the working matrix.
  Value sq = reduce_sum(b, b.mul(Uw, Uw), {2});
  Value sv = b.sqrt(sq);
  Value pad = b.compare(b.reshape(st[2], {B, np}), b.constant_int(n, DType::S32, {B, np}), Cmp::EQ);
  Value key = b.select(pad, b.constant(-1, t, {B, np}), sv);
  Value order = sort_order(b, key, true);
  Svd out;
  out.S = b.reshape(take_rows(b, b.reshape(sv, {B, np, 1}), order, n), {B, n});
  if (!compute_uv) return out;
  Value Us = take_rows(b, Uw, order, n);  // [B, n, m]
  Value Vs = b.slice(take_rows(b, st[1], order, n), {0, 0, 0}, {B, n, n});
  Value nz = b.compare(out.S, b.constant(0, t, {B, n}), Cmp::GT);
  Value inv = b.select(nz, b.div(b.constant(1, t, {B, n}), b.select(nz, out.S, b.constant(1, t, {B, n}))),
                       b.constant(0, t, {B, n}));
  Value U = b.mul(mT(b, Us), b.broadcast_in_dim(inv, {B, m, n}, {0, 2}));  // [B, m, n]
  out.U = orthonormal_completion(b, U, full ? m : n);
  out.Vh = Vs;
  return out;
}

// SVD of A [B, m, n]; a wide A is decomposed through A^T = V S U^T.
Svd jacobi_svd(Builder& b, Value A, bool full, bool compute_uv) {
  int64_t B = A.shape()[0], m = A.shape()[1], n = A.shape()[2], k = std::min(m, n);
  DType t = A.dtype();
  if (B == 0 || k == 0) {
    Svd e;
    e.S = b.constant(0, t, {B, k});
    e.U = eye(b, t, {B, m, full ? m : k});
    e.Vh = eye(b, t, {B, full ? n : k, n});
    return e;
  }
  if (m >= n) return jacobi_svd_tall(b, A, full, compute_uv);
  Svd r = jacobi_svd_tall(b, mT(b, A), full, compute_uv);
  if (compute_uv) std::swap(r.U, r.Vh), r.U = mT(b, r.U), r.Vh = mT(b, r.Vh);
  return r;
}

// _linalg_svd(A, full_matrices, compute_uv, *, driver) -> (U, S, Vh); without
// compute_uv, U and Vh are empty.
TT_RULE({"aten::_linalg_svd"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& so = c.out(1);
  DType ct = compute_dtype(so.dtype);
  bool full = a[1].b, uv = a[2].b;
  Value A = flatten_batch(b, b.convert(a[0].value(), ct));
  Svd r = jacobi_svd(b, A, full, uv);
  Values out{Value(), b.convert(b.reshape(r.S, so.shape), so.dtype), Value()};
  for (int i : {0, 2}) {
    const Type& t = c.out(i);
    out[i] = uv ? b.convert(b.reshape(i == 0 ? r.U : r.Vh, t.shape), t.dtype) : b.constant(0, t.dtype, t.shape);
  }
  return out;
});

}  // namespace
}  // namespace tt::lowering
