// The general (nonsymmetric) eigen-decomposition: linalg_eig and
// _linalg_eigvals, in complex arithmetic (a real input is promoted to the
// complex result dtype, as PyTorch's results are complex).
//
// 1. Hessenberg form H = Q^H A Q by Householder reflections.
// 2. The complex Schur form T = Q^H A Q by shifted QR sweeps on the
//    bottom-most unreduced block of H: Givens rotations, a Wilkinson shift
//    (an exceptional shift every 10 sweeps without deflation), deflation
//    where a subdiagonal entry is at rounding level relative to its diagonal
//    neighbours. All in stablehlo.while, batched: every batch element runs
//    the same sweep schedule, masked to its own active block, until all have
//    converged or 30 * max(n, 10) sweeps have run (LAPACK's zlahqr limit).
// 3. Eigenvalues diag(T). Eigenvectors by back substitution on T - T[k, k] I
//    for each k (a near-zero pivot is replaced by eps |T[k, k]|, as
//    LAPACK's ztrevc), times Q, normalised to unit 2-norm and rotated so that
//    the largest-magnitude component is real (as LAPACK's zgeev).
//
// Eigenvalues come in the Schur form's order, not LAPACK's; eigenvectors
// agree with LAPACK's up to that order (and up to phase where LAPACK's
// largest component ties). A real input's conjugate pairs are conjugate to
// rounding, not exactly.
#include <cmath>
#include <limits>

#include "lowering/device_check.h"
#include "lowering/ops/linalg_common.h"

namespace tt::lowering {
namespace {

using namespace linalg;

double epsilon(DType t) {
  return hlo::real_dtype(t) == DType::F64 ? std::numeric_limits<double>::epsilon()
                                           : std::numeric_limits<float>::epsilon();
}
double smallest(DType t) {
  return hlo::real_dtype(t) == DType::F64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
}

Value conj(Builder& b, Value x) { return b.complex(b.real(x), b.neg(b.imag(x))); }
// |x|^2 of a complex x, as a real value.
Value abs2(Builder& b, Value x) {
  Value re = b.real(x), im = b.imag(x);
  return b.add(b.mul(re, re), b.mul(im, im));
}
// A real value as complex (imaginary part zero).
Value cplx(Builder& b, Value re) { return b.complex(re, b.constant(0, re.dtype(), re.shape())); }

// The 2-norm of complex x [B, m] over dim 1 (scaled, as linalg::norm2).
Value cnorm2(Builder& b, Value x) {
  return norm2(b, b.concatenate({b.real(x), b.imag(x)}, 1));
}

// x[b, r[b], c[b]] of x [B, n, n] for i32 r, c [B].
Value entry(Builder& b, Value x, Value r, Value c) {
  const Shape& s = x.shape();
  Value hit = b.and_(b.compare(b.iota(Type{DType::S32, s}, 1), b.broadcast_in_dim(r, s, {0}), Cmp::EQ),
                     b.compare(b.iota(Type{DType::S32, s}, 2), b.broadcast_in_dim(c, s, {0}), Cmp::EQ));
  return reduce_sum(b, b.select(hit, x, b.constant(0, x.dtype(), s)), {1, 2});
}

// x - 2 u (u^H x) and the same from the right: (I - 2 u u^H) on each side.
Value reflect_left(Builder& b, Value x, Value u) {
  const Shape& s = x.shape();
  Value w = b.dot_general(conj(b, u), x, {0}, {0}, {1}, {1}, x.dtype(), "HIGHEST");  // [B, n]
  Value two_u = b.mul(u, b.constant(2, u.dtype(), u.shape()));
  return b.sub(x, b.mul(b.broadcast_in_dim(two_u, s, {0, 1}), b.broadcast_in_dim(w, s, {0, 2})));
}
Value reflect_right(Builder& b, Value x, Value u) {
  const Shape& s = x.shape();
  Value z = b.dot_general(x, u, {0}, {0}, {2}, {1}, x.dtype(), "HIGHEST");  // [B, m]
  Value two_z = b.mul(z, b.constant(2, z.dtype(), z.shape()));
  return b.sub(x, b.mul(b.broadcast_in_dim(two_z, s, {0, 1}), b.broadcast_in_dim(conj(b, u), s, {0, 2})));
}

// H = Q^H A Q upper Hessenberg for complex A [B, n, n]; returns {H, Q}.
std::pair<Value, Value> hessenberg(Builder& b, Value A) {
  int64_t B = A.shape()[0], n = A.shape()[1];
  DType t = A.dtype(), rt = hlo::real_dtype(t);
  Value Q = eye(b, t, {B, n, n});
  if (n > 2) {
    Values r = b.while_loop(
        {A, Q, b.constant_int(0, DType::S32)},
        [n](Builder& bb, const Values& s) { return Values{counter_below(bb, s[2], n - 2)}; },
        [B, n, t, rt](Builder& bb, const Values& s) {
          Value H = s[0], Q = s[1], j = s[2];
          Shape s2{B, n};
          Value z = bb.constant_int(0, DType::S32);
          Value row = bb.iota(Type{DType::S32, s2}, 1);
          Value j1 = bb.broadcast_in_dim(bb.add(j, bb.constant_int(1, DType::S32)), s2, {});
          Value col = bb.reshape(bb.dynamic_slice(H, {z, z, j}, {B, n, 1}), s2);
          Value zero = bb.constant(0, t, s2);
          Value at = bb.compare(row, j1, Cmp::EQ), below = bb.compare(row, j1, Cmp::GT);
          Value alpha = reduce_sum(bb, bb.select(at, col, zero), {1});  // [B]
          Value tail = cnorm2(bb, bb.select(below, col, zero));         // [B] real
          Value xnorm = cnorm2(bb, bb.select(bb.compare(row, j1, Cmp::GE), col, zero));
          Value aa = bb.abs(alpha);
          Value a0 = bb.compare(aa, bb.constant(0, rt, {B}), Cmp::EQ);
          Value phase = bb.select(a0, bb.constant(1, t, {B}), bb.div(alpha, cplx(bb, bb.select(a0, bb.constant(1, rt, {B}), aa))));
          Value beta = bb.neg(bb.mul(phase, cplx(bb, xnorm)));
          Value v = bb.select(at, bb.broadcast_in_dim(bb.sub(alpha, beta), s2, {0}), bb.select(below, col, zero));
          Value trivial = bb.compare(tail, bb.constant(0, rt, {B}), Cmp::EQ);
          Value vn = cnorm2(bb, v);
          Value safe = bb.select(trivial, bb.constant(1, rt, {B}), vn);
          Value u = bb.div(v, bb.broadcast_in_dim(cplx(bb, safe), s2, {0}));
          u = bb.select(bb.broadcast_in_dim(trivial, s2, {0}), zero, u);
          H = reflect_right(bb, reflect_left(bb, H, u), u);
          Q = reflect_right(bb, Q, u);
          return Values{H, Q, next(bb, j)};
        });
    A = r[0];
    Q = r[1];
  }
  // Below the subdiagonal is rounding noise now.
  Shape s3{B, n, n};
  Value keep = b.compare(diag_offset(b, s3), b.constant_int(-1, DType::S32, s3), Cmp::GE);
  return {b.select(keep, A, b.constant(0, t, s3)), Q};
}

// The rotation G = [[c, s], [-conj(s), c]] (c real) with G [x; y] = [r; 0];
// the identity where `keep` is false. x, y, keep [B]; c, s complex.
std::pair<Value, Value> givens(Builder& b, Value x, Value y, Value keep) {
  const Shape& s = x.shape();
  DType t = x.dtype(), rt = hlo::real_dtype(t);
  Value ax = b.abs(x), ay = b.abs(y);
  Value r = norm2(b, b.concatenate({b.reshape(ax, {s[0], 1}), b.reshape(ay, {s[0], 1})}, 1));
  Value r0 = b.compare(r, b.constant(0, rt, s), Cmp::EQ), x0 = b.compare(ax, b.constant(0, rt, s), Cmp::EQ);
  Value rs = b.select(r0, b.constant(1, rt, s), r);
  Value phase = b.select(x0, b.constant(1, t, s), b.div(x, cplx(b, b.select(x0, b.constant(1, rt, s), ax))));
  Value c = cplx(b, b.div(ax, rs));
  Value sn = b.mul(phase, b.div(conj(b, y), cplx(b, rs)));
  Value id = b.not_(b.and_(keep, b.not_(r0)));
  return {b.select(id, b.constant(1, t, s), c), b.select(id, b.constant(0, t, s), sn)};
}

// Rows (p, q) of P [B, 2, m] (p first) become (c p + s q, -conj(s) p + c q).
Value rotate_rows(Builder& b, Value P, Value c, Value s) {
  int64_t B = P.shape()[0], m = P.shape()[2];
  Shape s2{B, m};
  Value p = b.reshape(b.slice(P, {0, 0, 0}, {B, 1, m}), s2), q = b.reshape(b.slice(P, {0, 1, 0}, {B, 2, m}), s2);
  Value cb = b.broadcast_in_dim(c, s2, {0}), sb = b.broadcast_in_dim(s, s2, {0});
  Value p2 = b.add(b.mul(cb, p), b.mul(sb, q));
  Value q2 = b.sub(b.mul(cb, q), b.mul(conj(b, sb), p));
  return b.concatenate({b.reshape(p2, {B, 1, m}), b.reshape(q2, {B, 1, m})}, 1);
}

// Columns (p, q) of P [B, m, 2] times G^H: (c p + conj(s) q, -s p + c q).
Value rotate_cols(Builder& b, Value P, Value c, Value s) {
  Value rows = b.transpose(P, {0, 2, 1});
  int64_t B = rows.shape()[0], m = rows.shape()[2];
  Shape s2{B, m};
  Value p = b.reshape(b.slice(rows, {0, 0, 0}, {B, 1, m}), s2), q = b.reshape(b.slice(rows, {0, 1, 0}, {B, 2, m}), s2);
  Value cb = b.broadcast_in_dim(c, s2, {0}), sb = b.broadcast_in_dim(s, s2, {0});
  Value p2 = b.add(b.mul(cb, p), b.mul(conj(b, sb), q));
  Value q2 = b.sub(b.mul(cb, q), b.mul(sb, p));
  return b.transpose(b.concatenate({b.reshape(p2, {B, 1, m}), b.reshape(q2, {B, 1, m})}, 1), {0, 2, 1});
}

// One explicitly shifted QR sweep on rows/columns [lo, hi] of H: H - mu I =
// G^H R, H <- R G^H + mu I (rotations G_k for lo <= k < hi, applied to the
// whole H and accumulated into Q). Row rotation k and column rotation k-1
// interleave in one loop (column k-1 is no longer read by later rows).
std::pair<Value, Value> qr_sweep(Builder& b, Value H, Value Q, Value lo, Value hi, Value mu) {
  int64_t B = H.shape()[0], n = H.shape()[1];
  DType t = H.dtype();
  Shape s3{B, n, n};
  Value d = b.iota(Type{DType::S32, s3}, 1);
  Value on = b.and_(b.compare(diag_offset(b, s3), b.constant_int(0, DType::S32, s3), Cmp::EQ),
                    b.and_(b.compare(d, b.broadcast_in_dim(lo, s3, {0}), Cmp::GE),
                           b.compare(d, b.broadcast_in_dim(hi, s3, {0}), Cmp::LE)));
  Value shift = b.select(on, b.broadcast_in_dim(mu, s3, {0}), b.constant(0, t, s3));
  H = b.sub(H, shift);
  Values r = b.while_loop(
      {H, Q, lo, hi, b.constant(1, t, {B}), b.constant(0, t, {B}), b.constant_int(0, DType::S32)},
      [n](Builder& bb, const Values& s) { return Values{counter_below(bb, s[6], n)}; },
      [B, n](Builder& bb, const Values& s) {
        Value H = s[0], Q = s[1], lo = s[2], hi = s[3], k = s[6];
        Value z = bb.constant_int(0, DType::S32);
        Value kr = bb.min(k, bb.constant_int(n - 2, DType::S32));
        Value kb = bb.broadcast_in_dim(k, {B}, {});
        Value active = bb.and_(bb.compare(lo, kb, Cmp::LE), bb.compare(kb, hi, Cmp::LT));
        Value rows = bb.dynamic_slice(H, {z, kr, z}, {B, 2, n});
        Value x = bb.reshape(bb.dynamic_slice(rows, {z, z, kr}, {B, 1, 1}), {B});
        Value y = bb.reshape(bb.dynamic_slice(rows, {z, bb.constant_int(1, DType::S32), kr}, {B, 1, 1}), {B});
        auto [c, sn] = givens(bb, x, y, active);
        H = bb.dynamic_update_slice(H, rotate_rows(bb, rows, c, sn), {z, kr, z});
        // Column rotation k-1 (the identity carried in for k = 0).
        Value kc = bb.max(bb.sub(k, bb.constant_int(1, DType::S32)), z);
        kc = bb.min(kc, bb.constant_int(n - 2, DType::S32));
        H = bb.dynamic_update_slice(H, rotate_cols(bb, bb.dynamic_slice(H, {z, z, kc}, {B, n, 2}), s[4], s[5]), {z, z, kc});
        Q = bb.dynamic_update_slice(Q, rotate_cols(bb, bb.dynamic_slice(Q, {z, z, kc}, {B, n, 2}), s[4], s[5]), {z, z, kc});
        return Values{H, Q, lo, hi, c, sn, next(bb, k)};
      });
  return {b.add(r[0], shift), r[1]};
}

// The complex Schur form of Hessenberg H [B, n, n] (n >= 2): {T, Q}.
std::pair<Value, Value> schur(Builder& b, Value H, Value Q) {
  int64_t B = H.shape()[0], n = H.shape()[1];
  DType t = H.dtype(), rt = hlo::real_dtype(t);
  double eps = epsilon(t), tiny = smallest(t) * static_cast<double>(n) / eps;
  int64_t cap = 30 * std::max<int64_t>(n, 10);
  Values st = b.while_loop(
      {H, Q, b.constant_int(0, DType::S32, {B}), b.constant_int(-1, DType::S32, {B}), b.constant_int(0, DType::S32),
       b.constant_int(1, DType::Pred)},
      [cap](Builder& bb, const Values& s) { return Values{bb.and_(counter_below(bb, s[4], cap), s[5])}; },
      [B, n, t, rt, eps, tiny](Builder& bb, const Values& s) {
        Value H = s[0], Q = s[1], its = s[2], prev = s[3];
        Shape s2{B, n}, s3{B, n, n};
        Value offset = diag_offset(bb, s3);
        Value is_sub = bb.compare(offset, bb.constant_int(-1, DType::S32, s3), Cmp::EQ);
        Value sub = reduce_sum(bb, bb.select(is_sub, H, bb.constant(0, t, s3)), {2});  // sub[i] = H[i, i-1]
        Value d = diagonal(bb, H);
        Value dprev = bb.concatenate({bb.constant(0, t, {B, 1}), bb.slice(d, {0, 0}, {B, n - 1})}, 1);
        Value tst = bb.add(bb.abs(d), bb.abs(dprev));
        Value negl = bb.compare(bb.abs(sub), bb.max(bb.mul(tst, bb.constant(eps, rt, s2)), bb.constant(tiny, rt, s2)),
                                Cmp::LE);
        H = bb.select(bb.and_(is_sub, bb.broadcast_in_dim(negl, s3, {0, 1})), bb.constant(0, t, s3), H);
        // The bottom-most unreduced block [lo, hi]; hi = -1 once converged.
        Value idx = bb.iota(Type{DType::S32, s2}, 1);
        Value live = bb.and_(bb.not_(negl), bb.compare(idx, bb.constant_int(1, DType::S32, s2), Cmp::GE));
        Value hi = reduce_max(bb, bb.select(live, idx, bb.constant_int(-1, DType::S32, s2)), {1});
        Value split = bb.and_(bb.not_(live), bb.compare(idx, bb.broadcast_in_dim(hi, s2, {0}), Cmp::LE));
        Value lo = reduce_max(bb, bb.select(split, idx, bb.constant_int(0, DType::S32, s2)), {1});
        its = bb.select(bb.compare(hi, prev, Cmp::EQ), bb.add(its, bb.constant_int(1, DType::S32, {B})),
                        bb.constant_int(0, DType::S32, {B}));
        // Wilkinson shift: the eigenvalue of the trailing 2x2 block nearer its last entry.
        Value one = bb.constant_int(1, DType::S32, {B});
        Value h1 = bb.max(hi, one), h0 = bb.sub(h1, one);
        Value a = entry(bb, H, h0, h0), bq = entry(bb, H, h0, h1), c = entry(bb, H, h1, h0), dd = entry(bb, H, h1, h1);
        Value half = bb.mul(bb.sub(a, dd), bb.constant(0.5, t, {B}));
        Value bc = bb.mul(bq, c);
        Value disc = bb.sqrt(bb.add(bb.mul(half, half), bc));
        Value same = bb.compare(bb.add(bb.mul(bb.real(half), bb.real(disc)), bb.mul(bb.imag(half), bb.imag(disc))),
                                bb.constant(0, rt, {B}), Cmp::GE);
        Value den = bb.select(same, bb.add(half, disc), bb.sub(half, disc));
        Value den0 = bb.compare(bb.abs(den), bb.constant(0, rt, {B}), Cmp::EQ);
        Value mu = bb.select(den0, dd, bb.sub(dd, bb.div(bc, bb.select(den0, bb.constant(1, t, {B}), den))));
        // Exceptional shift after every 10 sweeps without deflation.
        Value ten = bb.constant_int(10, DType::S32, {B});
        Value exceptional = bb.and_(bb.compare(its, bb.constant_int(0, DType::S32, {B}), Cmp::GT),
                                    bb.compare(bb.sub(its, bb.mul(bb.div(its, ten), ten)), bb.constant_int(0, DType::S32, {B}), Cmp::EQ));
        mu = bb.select(exceptional, bb.add(dd, cplx(bb, bb.mul(bb.abs(c), bb.constant(0.75, rt, {B})))), mu);
        mu = bb.select(bb.compare(bb.abs(mu), bb.abs(mu), Cmp::EQ), mu, dd);  // a NaN shift: none
        auto [H2, Q2] = qr_sweep(bb, H, Q, lo, hi, mu);
        Value more = reduce_max(bb, bb.compare(hi, bb.constant_int(0, DType::S32, {B}), Cmp::GE), {0});
        return Values{H2, Q2, its, hi, next(bb, s[4]), more};
      });
  return {triu(b, st[0]), st[1]};
}

// Eigenvectors of upper-triangular T [B, n, n] as the columns of X (X[k, k]
// = 1, X[i, k] = 0 for i > k), by back substitution for every k at once.
Value triangular_eigenvectors(Builder& b, Value T) {
  int64_t B = T.shape()[0], n = T.shape()[1];
  DType t = T.dtype(), rt = hlo::real_dtype(t);
  double eps = epsilon(t), small = smallest(t) * static_cast<double>(n) / eps;
  Value lam = diagonal(b, T);  // [B, n]
  Value smin = b.max(b.mul(b.add(b.abs(b.real(lam)), b.abs(b.imag(lam))), b.constant(eps, rt, {B, n})),
                     b.constant(small, rt, {B, n}));
  Values r = b.while_loop(
      {eye(b, t, {B, n, n}), T, lam, smin, b.constant_int(n - 1, DType::S32)},
      [](Builder& bb, const Values& s) {
        return Values{bb.compare(s[4], bb.constant_int(0, DType::S32), Cmp::GE)};
      },
      [B, n, t, rt](Builder& bb, const Values& s) {
        Value X = s[0], T = s[1], lam = s[2], smin = s[3], i = s[4];
        Shape s2{B, n};
        Value z = bb.constant_int(0, DType::S32);
        Value row = bb.dynamic_slice(T, {z, i, z}, {B, 1, n});
        Value acc = bb.reshape(bb.dot_general(row, X, {0}, {0}, {2}, {1}, t, "HIGHEST"), s2);  // sum_j>i T[i,j] X[j,k]
        Value tii = bb.reshape(bb.dynamic_slice(T, {z, i, i}, {B, 1, 1}), {B});
        Value den = bb.sub(bb.broadcast_in_dim(tii, s2, {0}), lam);
        Value tiny = bb.compare(bb.add(bb.abs(bb.real(den)), bb.abs(bb.imag(den))), smin, Cmp::LT);
        den = bb.select(tiny, cplx(bb, smin), den);
        Value xi = bb.neg(bb.div(acc, den));
        Value later = bb.compare(bb.iota(Type{DType::S32, s2}, 1), bb.broadcast_in_dim(i, s2, {}), Cmp::GT);
        Value old = bb.reshape(bb.dynamic_slice(X, {z, i, z}, {B, 1, n}), s2);
        Value upd = bb.select(later, xi, old);
        X = bb.dynamic_update_slice(X, bb.reshape(upd, {B, 1, n}), {z, i, z});
        // Each column is a null vector up to scale: keep its largest entry at 1
        // so that tiny pivots (a defective or nilpotent T) cannot overflow.
        Value big = reduce_max(bb, bb.abs(X), {1});  // [B, n]
        Value ok = bb.compare(big, bb.constant(0, rt, s2), Cmp::GT);
        X = bb.div(X, bb.broadcast_in_dim(cplx(bb, bb.select(ok, big, bb.constant(1, rt, s2))), {B, n, n}, {0, 2}));
        return Values{X, T, lam, smin, bb.sub(i, bb.constant_int(1, DType::S32))};
      });
  return r[0];
}

// Columns of V [B, n, n] scaled to unit 2-norm, then rotated so that the
// first largest-magnitude component of each is real and positive.
Value normalize_columns(Builder& b, Value V) {
  int64_t B = V.shape()[0], n = V.shape()[1];
  DType t = V.dtype(), rt = hlo::real_dtype(t);
  Shape s3{B, n, n};
  Value cols = mT(b, V);  // [B, n, n]: columns as rows
  Value flat = b.reshape(cols, {B * n, n});
  Value nrm = b.reshape(cnorm2(b, flat), {B, n});
  Value nz = b.compare(nrm, b.constant(0, rt, {B, n}), Cmp::GT);
  Value scale = b.select(nz, nrm, b.constant(1, rt, {B, n}));
  V = b.div(V, b.broadcast_in_dim(cplx(b, scale), s3, {0, 2}));
  Value mag = abs2(b, V);
  Value mx = reduce_max(b, mag, {1});  // [B, n]
  Value row = b.iota(Type{DType::S32, s3}, 1);
  Value is_max = b.compare(mag, b.broadcast_in_dim(mx, s3, {0, 2}), Cmp::EQ);
  Value first = reduce_min(b, b.select(is_max, row, b.constant_int(n, DType::S32, s3)), {1});
  Value at = b.compare(row, b.broadcast_in_dim(first, s3, {0, 2}), Cmp::EQ);
  Value vk = reduce_sum(b, b.select(at, V, b.constant(0, t, s3)), {1});  // [B, n]
  Value ak = b.abs(vk);
  Value a0 = b.compare(ak, b.constant(0, rt, {B, n}), Cmp::EQ);
  Value rot = b.select(a0, b.constant(1, t, {B, n}),
                       b.div(conj(b, vk), cplx(b, b.select(a0, b.constant(1, rt, {B, n}), ak))));
  V = b.mul(V, b.broadcast_in_dim(rot, s3, {0, 2}));
  return b.select(at, cplx(b, b.real(V)), V);
}

struct Eig {
  Value values;   // [B, n]
  Value vectors;  // [B, n, n], eigenvectors as columns (invalid unless asked)
};

Eig general_eig(Builder& b, Value A, bool vectors) {
  int64_t B = A.shape()[0], n = A.shape()[1];
  DType t = A.dtype();
  if (B == 0 || n == 0) return {b.constant(0, t, {B, n}), b.constant(0, t, {B, n, n})};
  if (n == 1) return {b.reshape(A, {B, 1}), b.constant(1, t, {B, 1, 1})};
  // Work on A / max|A_ij| so that products of entries neither overflow nor
  // underflow (LAPACK's geev scales A likewise when its norm is extreme).
  DType rt = hlo::real_dtype(t);
  Value mx = reduce_max(b, b.abs(A), {1, 2});  // [B]
  Value usable = b.and_(b.compare(mx, b.constant(0, rt, {B}), Cmp::GT), b.unary("stablehlo.is_finite", mx));
  Value scale = cplx(b, b.select(usable, mx, b.constant(1, rt, {B})));
  A = b.div(A, b.broadcast_in_dim(scale, A.shape(), {0}));
  auto [H, Q] = hessenberg(b, A);
  auto [T, Z] = schur(b, H, Q);
  Eig e{b.mul(diagonal(b, T), b.broadcast_in_dim(scale, {B, n}, {0})), Value()};
  if (vectors) e.vectors = normalize_columns(b, matmul(b, Z, triangular_eigenvectors(b, T)));
  return e;
}

// As PyTorch's CPU kernel: RuntimeError for a non-finite input (LAPACK's
// geev would not converge on it).
void check_finite(Builder& b, const Context& c, Value A) {
  int64_t k = A.type.numel();
  if (k == 0) return;
  Value flat = b.reshape(A, {k});
  Value finite = b.and_(b.unary("stablehlo.is_finite", b.real(flat)), b.unary("stablehlo.is_finite", b.imag(flat)));
  check_each(b, c, b.not_(finite), b.constant_int(0, DType::S64, {k}), CheckError::Runtime,
             "torch.linalg.eig: input tensor should not contain infs or NaNs.");
}

// PyTorch's name of an integer or bool dtype, as its errors spell it.
std::string torch_name(DType t) {
  switch (t) {
    case DType::Pred: return "Bool";
    case DType::S8: return "Char";
    case DType::U8: return "Byte";
    case DType::S16: return "Short";
    case DType::S32: return "Int";
    default: return "Long";
  }
}

// The input checked in the CPU kernel's order with its exceptions (the
// backend skips PyTorch's meta kernel for the bad dtypes and ranks, which
// raises other ones), then promoted to `ct` and flattened to [B, n, n].
Value prepare(Builder& b, const Args& a, const Context& c, const std::string& name) {
  Value x = a[0].value();
  DType t = x.dtype();
  if (!hlo::is_float(t) && !hlo::is_complex(t)) throw InvalidArgument("Unknown Complex ScalarType for " + torch_name(t));
  if (t == DType::BF16 || t == DType::F16)
    throw NotImplementedForDtype(std::string("\"linalg_eig_out_cpu\" not implemented for '") +
                          (t == DType::BF16 ? "BFloat16" : "Half") + "'");
  if (x.rank() < 2) throw InvalidArgument(name + ": The input tensor A must have at least 2 dimensions.");
  if (x.shape()[x.rank() - 1] != x.shape()[x.rank() - 2])
    throw InvalidArgument(name + ": A must be batches of square matrices, but they are " +
                          std::to_string(x.shape()[x.rank() - 2]) + " by " + std::to_string(x.shape()[x.rank() - 1]) +
                          " matrices");
  check_finite(b, c, x);
  return flatten_batch(b, b.convert(x, hlo::complex_dtype(t)));
}

// linalg_eig(A) -> (eigenvalues [*, n], eigenvectors [*, n, n]), complex.
TT_RULE({"aten::linalg_eig"}, [](Builder& b, const Args& a, const Context& c) {
  Value A = prepare(b, a, c, "linalg.eig");
  const Type& lo = c.out(0);
  const Type& vo = c.out(1);
  Eig e = general_eig(b, A, true);
  return Values{b.reshape(e.values, lo.shape), b.reshape(e.vectors, vo.shape)};
});

// _linalg_eigvals(A) -> eigenvalues [*, n], complex.
TT_RULE({"aten::_linalg_eigvals"}, [](Builder& b, const Args& a, const Context& c) {
  Value A = prepare(b, a, c, "linalg.eigvals");
  const Type& lo = c.out(0);
  Eig e = general_eig(b, A, false);
  return Values{b.reshape(e.values, lo.shape)};
});

}  // namespace
}  // namespace tt::lowering
