// Connectionist temporal classification: _ctc_loss and _ctc_loss_backward,
// with the lengths as int lists or as tensors (.Tensor overloads). The
// reductions and zero_infinity's forward masking are ctc_loss's composite
// code on top; _ctc_loss returns the per-sample negative log likelihood and
// log_alpha.
//
// The CPU's recursions (Graves et al. 2006, in log space) as two
// stablehlo.while loops over time, vectorized over the batch and the
// extended target (blank, l1, blank, l2, ..., blank; S' = 2 * max_target + 1):
//   alpha[t, s] = lp[t, l'(s)] + logsumexp(alpha[t-1, s], alpha[t-1, s-1],
//                 alpha[t-1, s-2] where l'(s) is no blank and differs from l'(s-2));
//   beta likewise from t+1 and s, s+1, s+2. The gradient with respect to
//   log_probs is the CPU's: (exp(lp) - exp(logsumexp_{s: l'(s)=c}(alpha + beta)
//   + nll - lp)) * grad for t < input_length, else 0; zero_infinity zeroes
//   the gradient of a sample whose loss is infinite.
// log_alpha holds -inf past each sample's input and extended-target length
// (the CPU leaves those entries unwritten). Targets are [N, S] padded or 1-D
// concatenated. float32 and float64, as the CPU.
//
// The .Tensor overloads read the lengths on the device: log_alpha's last dim
// is then sized from the targets (2 * S + 1, or 2 * numel + 1 for 1-D
// targets), and the lengths' range is a device check.
#include <algorithm>
#include <limits>

#include "lowering/device_check.h"
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Ctc {
  int64_t T = 0, N = 0, C = 0, S = 0;  // S: the extended target length 2 * max_target + 1
  DType t = DType::F32;
  Value lp;       // [T, N, C]
  Value il, tl;   // [N] s64: input and target lengths
  Value labels;   // [N, S] s64: l'(s)
  Value lpe;      // [N, T, S]: lp[t, n, l'(n, s)]
  Value skip2;    // [N, S] i1: the s-2 -> s transition is allowed
  Value in_target;  // [N, S] i1: s <= 2 * target_length
};

Value neg_inf(Builder& b, DType t, const Shape& s) { return b.constant(kNegInf, t, s); }

// logsumexp of equally shaped values, -inf when all are -inf.
Value logsumexp(Builder& b, const Values& xs) {
  Value m = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) m = b.max(m, xs[i]);
  Value finite = b.compare(m, neg_inf(b, m.dtype(), m.shape()), Cmp::NE);
  Value safe = b.select(finite, m, b.constant(0, m.dtype(), m.shape()));
  Value sum = b.constant(0, m.dtype(), m.shape());
  for (const Value& x : xs) sum = b.add(sum, b.exp(b.sub(x, safe)));
  return b.select(finite, b.add(safe, b.log(sum)), m);
}

// x [N, S] moved by k along s (to higher s when k > 0), `fill` (0-d) filling.
Value shift(Builder& b, Value x, int64_t k, Value fill) {
  int64_t n = x.shape()[0], s = x.shape()[1];
  if (k >= s || -k >= s) return b.broadcast_in_dim(fill, x.shape(), {});
  if (k > 0) return b.pad(b.slice(x, {0, 0}, {n, s - k}), fill, {0, k}, {0, 0}, {0, 0});
  return b.pad(b.slice(x, {0, -k}, {n, s}), fill, {0, 0}, {0, -k}, {0, 0});
}
Value shift(Builder& b, Value x, int64_t k) { return shift(b, x, k, b.constant(kNegInf, x.dtype())); }

// Flat 1-D gather x[idx] for x [M] and idx (s64, in range) of any shape.
Value take(Builder& b, Value x, Value idx) {
  int64_t m = idx.type.numel();
  hlo::Builder::GatherDims dn;
  dn.collapsed_slice_dims = {0};
  dn.start_index_map = {0};
  dn.index_vector_dim = 1;
  return b.reshape(b.gather(x, b.reshape(idx, {m, 1}), dn, {1}, {m}), idx.shape());
}

Value clamp_index(Builder& b, Value i, int64_t size) {
  return b.clamp(b.constant_int(0, DType::S64, i.shape()), i,
                 b.constant_int(std::max<int64_t>(size - 1, 0), DType::S64, i.shape()));
}

Ctc prepare(Builder& b, Value lp, Value targets, Value il, Value tl, int64_t blank, int64_t S) {
  Ctc k;
  k.T = lp.shape()[0];
  k.N = lp.shape()[1];
  k.C = lp.shape()[2];
  k.S = S;
  k.t = lp.dtype();
  k.lp = lp;
  k.il = b.convert(il, DType::S64);
  k.tl = b.convert(tl, DType::S64);
  Shape ns{k.N, S};
  Value s = b.iota(Type{DType::S64, ns}, 1);
  Value j = b.div(s, b.constant_int(2, DType::S64, ns));  // odd s -> target (s-1)/2
  Value tg = b.convert(targets, DType::S64);
  Value label;
  if (tg.type.numel() == 0) {
    label = b.constant_int(blank, DType::S64, ns);
  } else if (tg.rank() == 2) {
    int64_t width = tg.shape()[1];
    Value pos = b.add(b.mul(b.iota(Type{DType::S64, ns}, 0), b.constant_int(width, DType::S64, ns)),
                      clamp_index(b, j, width));
    label = take(b, b.reshape(tg, {tg.type.numel()}), pos);
  } else {
    // 1-D: sample n's targets start at the sum of the earlier lengths.
    Shape nn{k.N, k.N};
    Value earlier = b.compare(b.iota(Type{DType::S64, nn}, 1), b.iota(Type{DType::S64, nn}, 0), Cmp::LT);
    Value start = reduce_sum(b, b.select(earlier, b.broadcast_in_dim(k.tl, nn, {1}), b.constant_int(0, DType::S64, nn)),
                             {1});
    Value pos = b.add(b.broadcast_in_dim(start, ns, {0}), j);
    label = take(b, tg, clamp_index(b, pos, tg.type.numel()));
  }
  Value odd = b.compare(b.binary("stablehlo.remainder", s, b.constant_int(2, DType::S64, ns)),
                        b.constant_int(1, DType::S64, ns), Cmp::EQ);
  k.labels = clamp_index(b, b.select(odd, label, b.constant_int(blank, DType::S64, ns)), k.C);
  Value len2 = b.mul(b.broadcast_in_dim(k.tl, ns, {0}), b.constant_int(2, DType::S64, ns));
  k.in_target = b.compare(s, len2, Cmp::LE);
  k.skip2 = b.and_(b.and_(odd, b.compare(s, b.constant_int(2, DType::S64, ns), Cmp::GE)),
                   b.compare(k.labels, shift(b, k.labels, 2, b.constant_int(-1, DType::S64)), Cmp::NE));
  // lpe[n, t, s] = lp[t, n, l'(n, s)], one flat gather.
  Shape nts{k.N, k.T, S};
  Value t_i = b.iota(Type{DType::S64, nts}, 1), n_i = b.iota(Type{DType::S64, nts}, 0);
  Value flat = b.add(b.mul(b.add(b.mul(t_i, b.constant_int(k.N, DType::S64, nts)), n_i),
                           b.constant_int(k.C, DType::S64, nts)),
                     b.broadcast_in_dim(k.labels, nts, {0, 2}));
  k.lpe = take(b, b.reshape(lp, {k.T * k.N * k.C}), flat);
  return k;
}

Value row_at(Builder& b, Value x, Value t) {
  int64_t n = x.shape()[0], s = x.shape()[2];
  Value z = b.constant_int(0, DType::S32);
  return b.reshape(b.dynamic_slice(x, {z, t, z}, {n, 1, s}), {n, s});
}

Value put_row(Builder& b, Value x, Value row, Value t) {
  Value z = b.constant_int(0, DType::S32);
  return b.dynamic_update_slice(x, b.reshape(row, {x.shape()[0], 1, x.shape()[2]}), {z, t, z});
}

// log_alpha [N, T, S], -inf outside each sample's lengths.
Value forward_alpha(Builder& b, const Ctc& k) {
  Shape ns{k.N, k.S}, nts{k.N, k.T, k.S};
  Value s = b.iota(Type{DType::S64, ns}, 1);
  Value start = b.and_(b.compare(s, b.constant_int(1, DType::S64, ns), Cmp::LE), k.in_target);
  Value z32 = b.constant_int(0, DType::S32);
  Value alpha0 = b.select(start, row_at(b, k.lpe, z32), neg_inf(b, k.t, ns));
  Value la = put_row(b, neg_inf(b, k.t, nts), alpha0, z32);
  int64_t T = k.T;
  Values r = b.while_loop(
      {b.constant_int(1, DType::S32), alpha0, la, k.lpe, k.skip2, k.in_target},
      [T](Builder& bb, const Values& st) { return Values{bb.compare(st[0], bb.constant_int(T, DType::S32), Cmp::LT)}; },
      [](Builder& bb, const Values& st) {
        Value t = st[0], prev = st[1], la = st[2], lpe = st[3], skip2 = st[4], in_target = st[5];
        Value ninf = neg_inf(bb, prev.dtype(), prev.shape());
        Value two = bb.select(skip2, shift(bb, prev, 2), ninf);
        Value next = bb.add(row_at(bb, lpe, t), logsumexp(bb, {prev, shift(bb, prev, 1), two}));
        next = bb.select(in_target, next, ninf);
        return Values{bb.add(t, bb.constant_int(1, DType::S32)), next, put_row(bb, la, next, t), lpe, skip2, in_target};
      });
  la = r[2];
  // Rows at or past each sample's input length are -inf.
  Value live = b.compare(b.iota(Type{DType::S64, nts}, 1), b.broadcast_in_dim(k.il, nts, {0}), Cmp::LT);
  return b.select(live, la, neg_inf(b, k.t, nts));
}

// [N, S] rows of x [N, T, S] at t = il - 1 (-inf where il is 0).
Value last_rows(Builder& b, const Ctc& k, Value x) {
  Shape nts{k.N, k.T, k.S};
  Value at = b.compare(b.iota(Type{DType::S64, nts}, 1),
                       b.broadcast_in_dim(b.sub(k.il, b.constant_int(1, DType::S64, {k.N})), nts, {0}), Cmp::EQ);
  return reduce_max(b, b.select(at, x, neg_inf(b, k.t, nts)), {1});
}

// The end states: s = 2 * target_length and s = 2 * target_length - 1.
Value end_states(Builder& b, const Ctc& k) {
  Shape ns{k.N, k.S};
  Value s = b.iota(Type{DType::S64, ns}, 1);
  Value len2 = b.mul(b.broadcast_in_dim(k.tl, ns, {0}), b.constant_int(2, DType::S64, ns));
  return b.or_(b.compare(s, len2, Cmp::EQ), b.compare(s, b.sub(len2, b.constant_int(1, DType::S64, ns)), Cmp::EQ));
}

// nll [N] from log_alpha: -logsumexp of the two end states at t = il - 1; a
// sample with no input has likelihood 1 for an empty target, else 0.
Value nll_of(Builder& b, const Ctc& k, Value la) {
  Shape ns{k.N, k.S};
  Value last = b.select(end_states(b, k), last_rows(b, k, la), neg_inf(b, k.t, ns));
  Value m = reduce_max(b, last, {1});
  Value finite = b.compare(m, neg_inf(b, k.t, {k.N}), Cmp::NE);
  Value safe = b.select(finite, m, b.constant(0, k.t, {k.N}));
  Value sum = reduce_sum(b, b.exp(b.sub(last, b.broadcast_in_dim(safe, ns, {0}))), {1});
  Value ll = b.select(finite, b.add(safe, b.log(sum)), m);
  Value no_input = b.compare(k.il, b.constant_int(0, DType::S64, {k.N}), Cmp::EQ);
  Value empty = b.compare(k.tl, b.constant_int(0, DType::S64, {k.N}), Cmp::EQ);
  ll = b.select(no_input, b.select(empty, b.constant(0, k.t, {k.N}), neg_inf(b, k.t, {k.N})), ll);
  return b.neg(ll);
}

// log_beta [N, T, S], -inf outside each sample's lengths.
Value backward_beta(Builder& b, const Ctc& k) {
  Shape ns{k.N, k.S}, nts{k.N, k.T, k.S};
  // The s -> s+2 transition out of s is allowed where skip2 holds at s+2.
  Value skip2_up = shift(b, k.skip2, -2, b.constant_int(0, DType::Pred));
  Value ends = end_states(b, k);
  Value last_t = b.sub(k.il, b.constant_int(1, DType::S64, {k.N}));
  int64_t T = k.T;
  Values r = b.while_loop(
      {b.constant_int(T - 1, DType::S32), neg_inf(b, k.t, ns), neg_inf(b, k.t, nts), k.lpe, skip2_up, k.in_target,
       ends, last_t},
      [](Builder& bb, const Values& st) { return Values{bb.compare(st[0], bb.constant_int(0, DType::S32), Cmp::GE)}; },
      [](Builder& bb, const Values& st) {
        Value t = st[0], prev = st[1], lb = st[2], lpe = st[3], skip2_up = st[4], in_target = st[5], ends = st[6],
              last_t = st[7];
        const Shape& ns = prev.shape();
        Value ninf = neg_inf(bb, prev.dtype(), ns);
        Value lp_t = row_at(bb, lpe, t);
        Value two = bb.select(skip2_up, shift(bb, prev, -2), ninf);
        Value next = bb.add(lp_t, logsumexp(bb, {prev, shift(bb, prev, -1), two}));
        Value tb = bb.broadcast_in_dim(bb.convert(t, DType::S64), ns, {});
        Value lt = bb.broadcast_in_dim(last_t, ns, {0});
        Value init = bb.select(ends, lp_t, ninf);
        next = bb.select(bb.compare(tb, lt, Cmp::EQ), init, bb.select(bb.compare(tb, lt, Cmp::LT), next, ninf));
        next = bb.select(in_target, next, ninf);
        return Values{bb.sub(t, bb.constant_int(1, DType::S32)), next, put_row(bb, lb, next, t), lpe, skip2_up,
                      in_target, ends, last_t};
      });
  return r[2];
}

// The [N] lengths as s64 values: a tensor argument or a host int list.
Value lengths(Builder& b, const Arg& a, int64_t n) {
  if (a.is_tensor()) return b.reshape(b.convert(a.value(), DType::S64), {n});
  if (static_cast<int64_t>(a.ints.size()) != n) throw InvalidArgument("lengths must be of size batch_size");
  if (n == 0) return b.constant_int(0, DType::S64, {0});
  Values parts;
  for (int64_t v : a.ints) parts.push_back(b.constant_int(v, DType::S64, {1}));
  return b.concatenate(parts, 0);
}

// The extended target length S: from the host lengths, else from the
// targets' shape.
int64_t extended_length(const Arg& targets, const Arg& tl) {
  int64_t max_t = 0;
  if (tl.is_tensor()) {
    Value tg = targets.value();
    max_t = tg.rank() == 2 ? tg.shape()[1] : tg.type.numel();
  } else {
    for (int64_t v : tl.ints) max_t = std::max(max_t, v);
  }
  return 2 * max_t + 1;
}

void check_dtype(Value lp) {
  if (lp.dtype() != DType::F32 && lp.dtype() != DType::F64)
    throw InvalidArgument("\"ctc_loss\" on tpu computes in float32 and float64 only, as the CPU's ctc_loss_cpu");
  if (lp.rank() != 3) throw InvalidArgument("ctc_loss: expected log_probs to be 3-D (T, N, C)");
}

// The lengths' range, on the device, for the .Tensor overloads (the int
// list overloads have it from the meta kernel).
void check_lengths(Builder& b, const Context& c, const Ctc& k, const Arg& targets) {
  if (k.N == 0) return;
  check_index_range(b, c, k.il, 0, k.T + 1, CheckError::Runtime,
                    "Expected input_lengths to have value at most " + std::to_string(k.T) + ", but got value {}");
  int64_t width = targets.value().rank() == 2 ? targets.value().shape()[1] : targets.value().type.numel();
  check_index_range(b, c, k.tl, 0, width + 1, CheckError::Runtime,
                    "Expected target_lengths to have value at most " + std::to_string(width) + ", but got value {}");
}

// _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)
//   -> (neg_log_likelihood [N], log_alpha [N, T, S])
Values ctc_forward(Builder& b, const Args& a, const Context& c) {
  Value lp = a[0].value();
  check_dtype(lp);
  int64_t N = lp.shape()[1], blank = a[4].i;
  if (blank < 0 || blank >= lp.shape()[2]) throw InvalidArgument("blank must be in label range");
  int64_t S = extended_length(a[1], a[3]), T = lp.shape()[0];
  if (N == 0 || T == 0) return Values{b.constant(0, lp.dtype(), {N}), neg_inf(b, lp.dtype(), {N, T, S})};
  Ctc k = prepare(b, lp, a[1].value(), lengths(b, a[2], N), lengths(b, a[3], N), blank, S);
  if (a[2].is_tensor()) check_lengths(b, c, k, a[1]);
  Value la = forward_alpha(b, k);
  return Values{nll_of(b, k, la), la};
}

TT_RULE({"aten::_ctc_loss", "aten::_ctc_loss.Tensor"}, ctc_forward);

// _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths,
// neg_log_likelihood, log_alpha, blank, zero_infinity) -> grad of log_probs
Values ctc_backward(Builder& b, const Args& a, const Context&) {
  Value lp = a[1].value();
  check_dtype(lp);
  int64_t T = lp.shape()[0], N = lp.shape()[1], C = lp.shape()[2], blank = a[7].i;
  DType t = lp.dtype();
  Value la = a[6].value();
  int64_t S = la.shape()[2];
  if (N == 0 || T == 0 || C == 0) return Values{b.constant(0, t, lp.shape())};
  Ctc k = prepare(b, lp, a[2].value(), lengths(b, a[3], N), lengths(b, a[4], N), blank, S);
  Value lb = backward_beta(b, k);
  Shape nts{N, T, S}, ntc{N, T, C};
  // lcab[n, t, c] = logsumexp over s with l'(s) = c of alpha + beta.
  Value ab = b.add(b.convert(la, t), lb);
  Value m = reduce_max(b, ab, {2});
  Value finite = b.compare(m, neg_inf(b, t, {N, T}), Cmp::NE);
  Value safe = b.select(finite, m, b.constant(0, t, {N, T}));
  Value e = b.exp(b.sub(ab, b.broadcast_in_dim(safe, nts, {0, 1})));
  Shape nsc{N, S, C};
  Value onehot = b.convert(b.compare(b.broadcast_in_dim(k.labels, nsc, {0, 1}), b.iota(Type{DType::S64, nsc}, 2), Cmp::EQ), t);
  Value sums = b.dot_general(e, onehot, {0}, {0}, {2}, {1}, t, "HIGHEST");  // [N, T, C]
  Value lcab = b.add(b.log(sums), b.broadcast_in_dim(safe, ntc, {0, 1}));
  Value lpn = b.transpose(lp, {1, 0, 2});  // [N, T, C]
  Value nll = b.broadcast_in_dim(b.convert(a[5].value(), t), ntc, {0});
  Value gr = b.broadcast_in_dim(b.convert(a[0].value(), t), ntc, {0});
  Value g = b.mul(b.sub(b.exp(lpn), b.exp(b.sub(b.add(lcab, nll), lpn))), gr);
  Value live = b.compare(b.iota(Type{DType::S64, ntc}, 1), b.broadcast_in_dim(k.il, ntc, {0}), Cmp::LT);
  if (a[8].b) {
    Value inf = b.compare(nll, b.constant(std::numeric_limits<double>::infinity(), t, ntc), Cmp::EQ);
    live = b.and_(live, b.not_(inf));
  }
  g = b.select(live, g, b.constant(0, t, ntc));
  return Values{b.transpose(g, {1, 0, 2})};
}

TT_RULE({"aten::_ctc_loss_backward", "aten::_ctc_loss_backward.Tensor"}, ctc_backward);

}  // namespace
}  // namespace tt::lowering
