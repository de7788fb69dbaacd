// LU-based linear algebra: partial-pivoting LU (linalg_lu_factor_ex,
// linalg_lu), unpacking (lu_unpack), solves (linalg_lu_solve,
// _linalg_solve_ex), inverse (linalg_inv_ex), determinants (_linalg_det,
// _linalg_slogdet) and the matrix exponential (linalg_matrix_exp, Padé with
// scaling and squaring, whose rational step is an LU solve).
// Batched over leading dims; f16/bf16 compute in f32. The factorisation runs
// as a stablehlo.while over columns (linalg_common.h), so programs stay small
// for large n.
#include <cmath>

#include "lowering/ops/linalg_common.h"

namespace tt::lowering {
namespace {

using namespace linalg;

constexpr const char* kNoPivot = "linalg.lu_factor: LU without pivoting is not implemented on the CPU";

// `x` ([*, r, c]) broadcast to batch dims `batch` and flattened to [B, r, c].
Value batched(Builder& b, Value x, const Shape& batch, DType t) {
  Shape s = with_matrix(batch, x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]);
  return flatten_batch(b, cast_to(b, x, t, s));
}

// pivots [*, k] broadcast to `batch` and flattened to [B, k], i32.
Value batched_pivots(Builder& b, Value p, const Shape& batch) {
  Shape s = batch;
  s.push_back(p.shape().back());
  return b.reshape(cast_to(b, p, DType::S32, s), {numel(batch), p.shape().back()});
}

Value finish(Builder& b, Value x, const Type& t) { return b.convert(b.reshape(x, t.shape), t.dtype); }

// The permutation matrix P [B, m, m] with A = P L U: P[perm[i], i] = 1.
Value perm_matrix(Builder& b, Value perm, DType t) {
  int64_t B = perm.shape()[0], m = perm.shape()[1];
  Shape s{B, m, m};
  Value hit = b.compare(b.broadcast_in_dim(perm, s, {0, 2}), b.iota(Type{DType::S32, s}, 1), Cmp::EQ);
  return b.convert(hit, t);
}

// L [B, m, k] (unit diagonal) and U [B, k, n] from a packed LU [B, m, n].
Values unpack_lu(Builder& b, Value lu) {
  int64_t B = lu.shape()[0], m = lu.shape()[1], n = lu.shape()[2], k = std::min(m, n);
  Value L = b.slice(lu, {0, 0, 0}, {B, m, k});
  L = b.add(tril(b, L, -1), eye(b, lu.dtype(), L.shape()));
  Value U = triu(b, b.slice(lu, {0, 0, 0}, {B, k, n}));
  return {L, U};
}

// (-1)^(number of row interchanges) of 1-based pivots [B, k], in `t`.
Value pivot_sign(Builder& b, Value piv, DType t) {
  const Shape& s = piv.shape();
  Value own = b.add(b.iota(Type{DType::S32, s}, 1), b.constant_int(1, DType::S32, s));
  Value swapped = b.compare(piv, own, Cmp::NE);
  Value flips = reduce_sum(b, b.convert(swapped, DType::S32), {1});
  Value odd = b.compare(b.and_(flips, b.constant_int(1, DType::S32, flips.shape())),
                        b.constant_int(0, DType::S32, flips.shape()), Cmp::NE);
  return b.select(odd, b.constant(-1, t, flips.shape()), b.constant(1, t, flips.shape()));
}

Value reduce_prod(Builder& b, Value x, int64_t dim) {
  return b.reduce(x, b.constant(1, x.dtype()), {dim}, "stablehlo.multiply");
}

// linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info)
TT_RULE({"aten::linalg_lu_factor_ex"}, [](Builder& b, const Args& a, const Context& c) {
  if (!a[1].b) throw InvalidArgument(kNoPivot);
  const Type& lo = c.out(0);
  Value A = flatten_batch(b, b.convert(a[0].value(), compute_dtype(lo.dtype)));
  LU f = lu_factor(b, A);
  return Values{finish(b, f.lu, lo), finish(b, f.piv, c.out(1)), finish(b, f.info, c.out(2))};
});

// linalg_lu(A, *, pivot) -> (P, L, U)
TT_RULE({"aten::linalg_lu"}, [](Builder& b, const Args& a, const Context& c) {
  if (!a[1].b) throw InvalidArgument(kNoPivot);
  DType ct = compute_dtype(c.out(1).dtype);
  Value A = flatten_batch(b, b.convert(a[0].value(), ct));
  LU f = lu_factor(b, A);
  Values lu = unpack_lu(b, f.lu);
  return Values{finish(b, perm_matrix(b, f.perm, ct), c.out(0)), finish(b, lu[0], c.out(1)), finish(b, lu[1], c.out(2))};
});

// lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots) -> (P, L, U);
// what is not unpacked comes back empty.
TT_RULE({"aten::lu_unpack"}, [](Builder& b, const Args& a, const Context& c) {
  Value packed = a[0].value();
  DType ct = compute_dtype(packed.dtype());
  int64_t m = packed.shape()[packed.rank() - 2];
  Shape batch = batch_of(packed.shape());
  Values out(3);
  auto empty = [&](size_t i) { return b.constant(0, c.out(i).dtype, c.out(i).shape); };
  if (a[3].b) {
    Value piv = batched_pivots(b, a[1].value(), batch);
    out[0] = finish(b, perm_matrix(b, perm_from_pivots(b, piv, m), ct), c.out(0));
  } else {
    out[0] = empty(0);
  }
  if (a[2].b) {
    Values lu = unpack_lu(b, flatten_batch(b, b.convert(packed, ct)));
    out[1] = finish(b, lu[0], c.out(1));
    out[2] = finish(b, lu[1], c.out(2));
  } else {
    out[1] = empty(1);
    out[2] = empty(2);
  }
  return out;
});

// Solves with a factorisation [B, n, n] (row order perm) from either side:
// op(A) X = rhs (left) or X op(A) = rhs, op = transpose when `adjoint`.
Value solve_with(Builder& b, Value lu, Value perm, Value rhs, bool left, bool adjoint) {
  if (left) return lu_solve(b, lu, perm, rhs, adjoint);
  // X op(A) = R  <=>  op(A)^T X^T = R^T
  return mT(b, lu_solve(b, lu, perm, mT(b, rhs), !adjoint));
}

// linalg_lu_solve(LU, pivots, B, *, left, adjoint) -> X
TT_RULE({"aten::linalg_lu_solve"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Shape batch = batch_of(out.shape);
  bool left = a[3].b, adjoint = a[4].b;
  Value lu = batched(b, a[0].value(), batch, ct);
  Value rhs = batched(b, a[2].value(), batch, ct);
  if (numel(out.shape) == 0) return Values{finish(b, rhs, out)};
  Value perm = perm_from_pivots(b, batched_pivots(b, a[1].value(), batch), lu.shape()[1]);
  return Values{finish(b, solve_with(b, lu, perm, rhs, left, adjoint), out)};
});

// linalg_inv_ex(A, *, check_errors) -> (inverse, info)
TT_RULE({"aten::linalg_inv_ex"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out(0);
  Value A = flatten_batch(b, b.convert(a[0].value(), compute_dtype(out.dtype)));
  LU f = lu_factor(b, A);
  Value inv = lu_solve(b, f.lu, f.perm, eye(b, A.dtype(), A.shape()), false);
  return Values{finish(b, inv, out), finish(b, f.info, c.out(1))};
});

// _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots, info).
// B is a (batch of) vector(s) when it is 1-d or A's shape without its last
// dim, as PyTorch decides; LU, pivots and info keep A's own batch dims.
TT_RULE({"aten::_linalg_solve_ex"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out(0);
  DType ct = compute_dtype(out.dtype);
  Value Av = a[0].value(), Bv = a[1].value();
  bool left = a[2].b;
  Shape a_vec(Av.shape().begin(), Av.shape().end() - 1);
  bool vector = Bv.rank() == 1 || (Bv.rank() == Av.rank() - 1 && Bv.shape() == a_vec);
  Shape rshape = out.shape;
  if (vector) rshape.insert(rshape.end() - (left ? 0 : 1), 1);
  Shape batch = batch_of(rshape);
  if (vector) Bv = b.reshape(Bv, [&] {
      Shape s = Bv.shape();
      s.insert(s.end() - (left ? 0 : 1), 1);
      return s;
    }());
  LU f = lu_factor(b, flatten_batch(b, b.convert(Av, ct)));
  Value X;
  if (numel(rshape) == 0) {
    X = b.constant(0, ct, rshape);
  } else {
    // Solve with A's factorisation broadcast to the result's batch.
    Shape abatch = batch_of(Av.shape());
    int64_t n = Av.shape().back();
    auto expand = [&](Value x, Shape inner, DType t) {
      Shape from = abatch, to = batch;
      from.insert(from.end(), inner.begin(), inner.end());
      to.insert(to.end(), inner.begin(), inner.end());
      return b.reshape(b.broadcast_to(b.reshape(b.convert(x, t), from), to), [&] {
        Shape s{numel(batch)};
        s.insert(s.end(), inner.begin(), inner.end());
        return s;
      }());
    };
    Value lu = expand(f.lu, {n, n}, ct), perm = expand(f.perm, {n}, DType::S32);
    X = solve_with(b, lu, perm, batched(b, Bv, batch, ct), left, false);
  }
  return Values{finish(b, X, out), finish(b, f.lu, c.out(1)), finish(b, f.piv, c.out(2)), finish(b, f.info, c.out(3))};
});

// PyTorch factors A^T for a contiguous A in det and slogdet (det(A^T) =
// det(A)) and A itself otherwise; their backward solves with the LU it gets
// back accordingly, so the rule follows the input's contiguity (Arg::contiguous;
// inside a torch.compile graph a contiguous A is assumed).
LU det_factor(Builder& b, const Arg& A, DType ct) {
  Value x = b.convert(A.value(), ct);
  return lu_factor(b, flatten_batch(b, A.contiguous ? mT(b, x) : x));
}

// _linalg_det(A) -> (result, LU, pivots)
TT_RULE({"aten::_linalg_det"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out(0);
  DType ct = compute_dtype(out.dtype);
  LU f = det_factor(b, a[0], ct);
  Value det = b.mul(reduce_prod(b, diagonal(b, f.lu), 1), pivot_sign(b, f.piv, ct));
  return Values{finish(b, det, out), finish(b, f.lu, c.out(1)), finish(b, f.piv, c.out(2))};
});

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots); a singular A has sign
// 0 and logabsdet -inf.
TT_RULE({"aten::_linalg_slogdet"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out(0);
  DType ct = compute_dtype(out.dtype);
  LU f = det_factor(b, a[0], ct);
  Value d = diagonal(b, f.lu);
  Value sign = b.mul(reduce_prod(b, b.unary("stablehlo.sign", d), 1), pivot_sign(b, f.piv, ct));
  Value logabs = reduce_sum(b, b.log(b.abs(d)), {1});
  return Values{finish(b, sign, out), finish(b, logabs, c.out(1)), finish(b, f.lu, c.out(2)), finish(b, f.piv, c.out(3))};
});

// linalg_matrix_exp(A): Padé [13/13] with scaling and squaring (Higham,
// 2005). The number of squarings s follows each matrix's 1-norm at run time
// (A / 2^s has norm <= theta_13); the squaring loop runs to the batch's
// largest s and leaves a matrix alone once its own s is reached.
TT_RULE({"aten::linalg_matrix_exp"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value A = flatten_batch(b, b.convert(a[0].value(), ct));
  int64_t B = A.shape()[0], n = A.shape()[1];
  if (B == 0 || n == 0) return Values{finish(b, A, out)};
  const Shape& s3 = A.shape();
  constexpr double kTheta13 = 5.371920351148152;
  static const double kB[14] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
                                129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0,
                                1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0};
  Value norm1 = reduce_max(b, reduce_sum(b, b.abs(A), {1}), {1});  // [B]: largest column sum
  Value steps = b.unary("stablehlo.ceil", b.div(b.log(b.div(norm1, b.constant(kTheta13, ct, {B}))),
                                                b.constant(std::log(2.0), ct, {B})));
  Value finite = b.compare(steps, steps, Cmp::EQ);
  steps = b.select(finite, b.max(steps, b.constant(0, ct, {B})), b.constant(0, ct, {B}));
  steps = b.min(steps, b.constant(64, ct, {B}));
  Value scale = b.unary("stablehlo.exponential", b.mul(b.neg(steps), b.constant(std::log(2.0), ct, {B})));
  Value X = b.mul(A, b.broadcast_in_dim(scale, s3, {0}));
  Value I = eye(b, ct, s3);
  auto k = [&](int i, Value M) { return b.mul(b.constant(kB[i], ct, s3), M); };
  Value X2 = matmul(b, X, X), X4 = matmul(b, X2, X2), X6 = matmul(b, X4, X2);
  Value u_in = b.add(b.add(k(13, X6), k(11, X4)), k(9, X2));
  Value U = matmul(b, X, b.add(matmul(b, X6, u_in), b.add(b.add(k(7, X6), k(5, X4)), b.add(k(3, X2), k(1, I)))));
  Value v_in = b.add(b.add(k(12, X6), k(10, X4)), k(8, X2));
  Value V = b.add(matmul(b, X6, v_in), b.add(b.add(k(6, X6), k(4, X4)), b.add(k(2, X2), k(0, I))));
  LU f = lu_factor(b, b.sub(V, U));
  Value R = lu_solve(b, f.lu, f.perm, b.add(V, U), false);
  Value times = b.convert(steps, DType::S32);
  Value most = reduce_max(b, times, {0});
  Values sq = b.while_loop(
      {R, times, most, b.constant_int(0, DType::S32)},
      [](Builder& bb, const Values& st) { return Values{bb.compare(st[3], st[2], Cmp::LT)}; },
      [s3, B](Builder& bb, const Values& st) {
        Value more = bb.compare(bb.broadcast_in_dim(st[3], {B}, {}), st[1], Cmp::LT);
        Value R = bb.select(bb.broadcast_in_dim(more, s3, {0}), matmul(bb, st[0], st[0]), st[0]);
        return Values{R, st[1], st[2], next(bb, st[3])};
      });
  return Values{finish(b, sq[0], out)};
});

}  // namespace
}  // namespace tt::lowering
