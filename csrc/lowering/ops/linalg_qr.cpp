// QR family, by Householder reflections in LAPACK's representation
// (linalg_common.h): geqrf, linalg_qr (modes reduced / complete / r),
// linalg_householder_product (orgqr) and ormqr. Q and R therefore match
// LAPACK's, signs included. Batched over leading dims; f16/bf16 compute in
// f32. geqrf and ormqr have no meta kernel, so their rules shape their own
// results.
#include "lowering/ops/linalg_common.h"

namespace tt::lowering {
namespace {

using namespace linalg;

Value unflatten(Builder& b, Value x, const Shape& batch, DType t) {
  return b.convert(b.reshape(x, with_matrix(batch, x.shape()[1], x.shape()[2])), t);
}

// [*, k] -> [B, k] in `t`.
Value flat_vector(Builder& b, Value x, DType t) {
  return b.convert(b.reshape(x, {numel(Shape(x.shape().begin(), x.shape().end() - 1)), x.shape().back()}), t);
}

// geqrf(self) -> (a, tau)
TT_RULE({"aten::geqrf"}, [](Builder& b, const Args& a, const Context&) {
  Value A = a[0].value();
  DType t = A.dtype(), ct = compute_dtype(t);
  Shape batch = batch_of(A.shape());
  Householder h = householder_qr(b, flatten_batch(b, b.convert(A, ct)));
  Shape ts = batch;
  ts.push_back(h.tau.shape()[1]);
  return Values{unflatten(b, h.a, batch, t), b.convert(b.reshape(h.tau, ts), t)};
});

// linalg_qr(A, mode) -> (Q, R); mode "r" leaves Q empty.
TT_RULE({"aten::linalg_qr"}, [](Builder& b, const Args& a, const Context& c) {
  const std::string& mode = a[1].s;
  if (mode != "reduced" && mode != "complete" && mode != "r")
    throw InvalidArgument("qr received unrecognized mode '" + mode +
                          "' but expected one of 'reduced' (default), 'r', or 'complete'");
  Value A = a[0].value();
  DType t = c.out(1).dtype, ct = compute_dtype(t);
  Shape batch = batch_of(A.shape());
  Value F = flatten_batch(b, b.convert(A, ct));
  int64_t B = F.shape()[0], m = F.shape()[1], n = F.shape()[2], k = std::min(m, n);
  Householder h = householder_qr(b, F);
  bool complete = mode == "complete";
  int64_t rrows = complete ? m : k;
  Value R = triu(b, b.slice(h.a, {0, 0, 0}, {B, rrows, n}));
  Value Q;
  if (mode == "r") {
    Q = b.constant(0, c.out(0).dtype, c.out(0).shape);
  } else {
    int64_t qcols = complete ? m : k;
    Q = unflatten(b, apply_q(b, h.a, h.tau, eye(b, ct, {B, m, qcols}), false), batch, t);
  }
  return Values{Q, unflatten(b, R, batch, t)};
});

// linalg_householder_product(input, tau) -> the first n columns of
// H_0 ... H_{k-1} (LAPACK's orgqr).
TT_RULE({"aten::linalg_householder_product"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value V = flatten_batch(b, b.convert(a[0].value(), ct));
  Value tau = flat_vector(b, a[1].value(), ct);
  Value Q = apply_q(b, V, tau, eye(b, ct, V.shape()), false);
  return Values{b.convert(b.reshape(Q, out.shape), out.dtype)};
});

// ormqr(self, input2 = tau, input3 = C, left, transpose): op(Q) C or C op(Q).
TT_RULE({"aten::ormqr"}, [](Builder& b, const Args& a, const Context&) {
  Value Cv = a[2].value();
  DType t = Cv.dtype(), ct = compute_dtype(t);
  bool left = a[3].b, transpose = a[4].b;
  Shape batch = batch_of(Cv.shape());
  Value V = flatten_batch(b, b.convert(a[0].value(), ct));
  Value tau = flat_vector(b, a[1].value(), ct);
  Value C = flatten_batch(b, b.convert(Cv, ct));
  // C op(Q) = (op(Q)^T C^T)^T.
  Value X = left ? apply_q(b, V, tau, C, transpose) : mT(b, apply_q(b, V, tau, mT(b, C), !transpose));
  return Values{unflatten(b, X, batch, t)};
});

}  // namespace
}  // namespace tt::lowering
