// linalg_lstsq for full-rank systems, by Householder QR (linalg_common.h).
//
// A [*, m, n], B [*, m, k] (or [*, m]): for m >= n the least-squares
// solution R^-1 (Q^T B)[:n]; for m < n the minimum-norm one Q [R^-T B; 0]
// from A^T = Q R. Results as the CPU's drivers return them:
//   gelsy (the default): solution and rank; residuals and singular values empty;
//   gels: solution, and residuals ||A X - B||^2 per column when m > n; rank
//         and singular values empty.
// gelsd and gelss (singular values) have no rule here.
//
// Only full-rank systems: a matrix whose R has a diagonal entry at most
// rcond (default eps * max(m, n)) times its largest raises a RuntimeError
// at the next host wait (a device check). A small |R_ii| ratio bounds
// sigma_min / sigma_max from above, so every matrix that raises is one
// LAPACK's gelsy would also treat as rank deficient; a rank-deficient matrix
// whose unpivoted R hides it (rare, e.g. Kahan's) is not caught.
// float32 and float64 only, as the CPU.
#include <limits>

#include "lowering/device_check.h"
#include "lowering/ops/linalg_common.h"

namespace tt::lowering {
namespace {

using namespace linalg;

// x [*, r, c] broadcast to batch `batch`, flattened to [B, r, c].
Value batch_to(Builder& b, Value x, const Shape& batch) {
  int64_t r = x.shape()[x.rank() - 2], c = x.shape()[x.rank() - 1];
  return b.reshape(b.broadcast_to(x, with_matrix(batch, r, c)), {numel(batch), r, c});
}

TT_RULE({"aten::linalg_lstsq"}, [](Builder& b, const Args& a, const Context& c) {
  Value A = a[0].value(), Bv = a[1].value();
  const std::string driver = a[3].is_none() ? "gelsy" : a[3].s;
  if (driver != "gels" && driver != "gelsy" && driver != "gelsd" && driver != "gelss")
    throw InvalidArgument("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  if (driver == "gelsd" || driver == "gelss")
    throw LoweringError("linalg_lstsq: driver '" + driver + "' returns singular values, which the QR rule does not");
  DType t = A.dtype();
  if (t != DType::F32 && t != DType::F64)
    throw InvalidArgument("This function doesn't handle types other than float and double");
  if (Bv.dtype() != t) throw LoweringError("linalg_lstsq: input and other of different dtypes");
  int64_t m = A.shape()[A.rank() - 2], n = A.shape()[A.rank() - 1];
  // B is a vector (or a batch of them) as linalg.solve decides it.
  bool vector = Bv.rank() == 1 ||
                (Bv.rank() == A.rank() - 1 && Bv.shape() == Shape(A.shape().begin(), A.shape().end() - 1));
  if (vector) {
    Shape s = Bv.shape();
    s.push_back(1);
    Bv = b.reshape(Bv, s);
  }
  if (Bv.shape()[Bv.rank() - 2] != m) throw InvalidArgument("torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  int64_t k = Bv.shape()[Bv.rank() - 1];
  // linalg_lstsq has no meta kernel: the results' shapes, as the CPU's.
  Shape batch = broadcast_shapes({batch_of(A.shape()), batch_of(Bv.shape())});
  Shape x_shape = with_matrix(batch, n, k);
  if (vector) x_shape.pop_back();
  bool has_residuals = driver == "gels" && m > n;
  Shape res_shape = batch;
  res_shape.push_back(has_residuals ? k : 0);
  if (!has_residuals) res_shape = {0};
  Shape rank_shape = driver == "gelsy" ? batch_of(A.shape()) : Shape{0};
  int64_t nb = numel(batch), p = std::min(m, n);
  Value F = batch_to(b, A, batch), RHS = batch_to(b, Bv, batch);
  Value X, rank = b.constant_int(0, DType::S64, rank_shape), none = b.constant(0, t, {0});
  Value residuals = b.constant(0, t, res_shape);
  if (nb == 0 || p == 0 || k == 0) {
    // X = 0; its residuals are |B|^2.
    if (has_residuals && nb * k > 0) residuals = b.reshape(reduce_sum(b, b.mul(RHS, RHS), {1}), res_shape);
    return Values{b.constant(0, t, x_shape), residuals, rank, none};
  }
  // QR of A (m >= n) or of A^T (m < n): R is [B, p, p].
  Householder h = householder_qr(b, m >= n ? F : mT(b, F));
  Value R = triu(b, b.slice(h.a, {0, 0, 0}, {nb, p, p}));
  Value diag = b.abs(diagonal(b, R));  // [B, p]
  double eps = t == DType::F32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  double rcond = a[2].is_none() ? eps * static_cast<double>(std::max(m, n)) : a[2].d;
  Value big = reduce_max(b, diag, {1});
  Value small = b.compare(diag, b.mul(b.broadcast_in_dim(big, {nb, p}, {0}), b.constant(rcond, t, {nb, p})), Cmp::LE);
  Value deficient = b.compare(reduce_max(b, b.convert(small, DType::S32), {1}), b.constant_int(0, DType::S32, {nb}),
                              Cmp::GT);
  // The first rank-deficient matrix's batch index.
  Value which = b.select(deficient, b.iota(Type{DType::S64, {nb}}, 0), b.constant_int(-1, DType::S64, {nb}));
  check_each(b, c, deficient, which, CheckError::Runtime,
             "torch.linalg.lstsq: on tpu the input must have full rank (solved by QR without pivoting), but "
             "batch element {} is rank deficient; use driver='gelsd' on the CPU for rank-deficient systems");
  Value Qtb;
  if (m >= n) {
    Qtb = apply_q(b, h.a, h.tau, RHS, true);  // [B, m, k]
    X = tri_solve(b, R, b.slice(Qtb, {0, 0, 0}, {nb, n, k}), true, false, false, false);
  } else {
    Value y = tri_solve(b, R, RHS, true, false, false, true);  // R^T y = B: [B, m, k]
    y = b.pad(y, b.constant(0, t), {0, 0, 0}, {0, n - m, 0}, {0, 0, 0});
    X = apply_q(b, h.a, h.tau, y, false);
  }
  X = b.reshape(X, x_shape);
  if (driver == "gelsy") rank = b.constant_int(p, DType::S64, rank_shape);
  if (has_residuals) {
    Value tail = b.slice(Qtb, {0, n, 0}, {nb, m, k});
    residuals = b.reshape(reduce_sum(b, b.mul(tail, tail), {1}), res_shape);
  }
  return Values{X, residuals, rank, none};
});

}  // namespace
}  // namespace tt::lowering
