// poisson(rates): Poisson-distributed counts on the device's counter-based
// generator, by the methods PyTorch's CPU kernel uses: rates below 10
// multiply uniforms until the product falls to exp(-rate) (the count of
// factors before that is the sample); rates of 10 or more use Hormann's
// transformed rejection (PTRS). Every element draws in lockstep in one while
// loop (at most kMaxRounds rounds; both methods finish far sooner with
// overwhelming probability). Round k draws under its own keys at the op's
// reserved counters, so no two calls share random bits. A rate of 0 gives 0.
// Computed in f32: for rates above about 1e4 the acceptance test's terms
// (about k log k) leave f32 too few digits and the tails drift.
// The numbers differ from the CPU's (another generator); the distribution
// is the same.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/random_bits.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

constexpr int64_t kMaxRounds = 512;
constexpr int64_t kKeyStep = 0x5851F42D4C957F2D;  // odd; keys of different rounds never meet


Value draw(Builder& b, Value seed, Value offset, Value round, int64_t lane, const Shape& s) {
  Context c;
  c.rng_seed = round_key(b, seed, round, lane + 1, kKeyStep);
  c.rng_offset = offset;
  return uniform01(b, c, s, DType::F32);
}

TT_RULE({"aten::poisson"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  if (!hlo::is_float(o.dtype)) throw LoweringError("poisson of a non-floating-point tensor");
  const Shape& s = o.shape;
  auto k = [&](double v) { return b.constant(v, DType::F32, s); };
  Value lam = b.convert(a[0].value(), DType::F32);
  // State: sample, done, product (small rates), round, seed, offset, rate.
  Values st = b.while_loop(
      {k(0), b.compare(lam, k(0), Cmp::LE), k(1), b.constant_int(0, DType::S32), c.rng_seed, c.rng_offset, lam},
      [](Builder& bb, const Values& v) {
        std::vector<int64_t> dims(v[1].shape().size());
        for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
        Value all_done = bb.reduce(v[1], bb.constant_int(1, DType::Pred), dims, "stablehlo.and");
        Value more = bb.compare(v[3], bb.constant_int(kMaxRounds, DType::S32), Cmp::LT);
        return Values{bb.and_(bb.not_(all_done), more)};
      },
      [](Builder& bb, const Values& v) {
        const Shape& s = v[0].shape();
        auto k = [&](double x) { return bb.constant(x, DType::F32, s); };
        Value lam = v[6];
        Value u1 = draw(bb, v[4], v[5], v[3], 0, s), u2 = draw(bb, v[4], v[5], v[3], 1, s);
        Value large = bb.compare(lam, k(10), Cmp::GE);
        // Small rates: one more factor; the sample is the number of factors
        // taken while the product stayed above exp(-rate).
        Value prod = bb.mul(v[2], u1);
        Value small_done = bb.compare(prod, bb.exp(bb.neg(lam)), Cmp::LE);
        Value small_value = v[0];  // factors before this one
        // PTRS for large rates.
        Value slam = bb.sqrt(lam), loglam = bb.log(lam);
        Value bb_ = bb.add(k(0.931), bb.mul(k(2.53), slam));
        Value aa = bb.add(k(-0.059), bb.mul(k(0.02483), bb_));
        Value invalpha = bb.add(k(1.1239), bb.div(k(1.1328), bb.sub(bb_, k(3.4))));
        Value vr = bb.sub(k(0.9277), bb.div(k(3.6224), bb.sub(bb_, k(2))));
        Value U = bb.sub(u1, k(0.5)), V = u2;
        Value us = bb.sub(k(0.5), bb.abs(U));
        Value kk = bb.unary("stablehlo.floor",
                            bb.add(bb.mul(bb.add(bb.div(bb.mul(k(2), aa), us), bb_), U), bb.add(lam, k(0.43))));
        Value quick = bb.and_(bb.compare(us, k(0.07), Cmp::GE), bb.compare(V, vr, Cmp::LE));
        Value reject = bb.or_(bb.compare(kk, k(0), Cmp::LT),
                              bb.and_(bb.compare(us, k(0.013), Cmp::LT), bb.compare(V, us, Cmp::GT)));
        Value safe_k = bb.max(kk, k(0));
        Value lhs = bb.sub(bb.add(bb.log(V), bb.log(invalpha)), bb.log(bb.add(bb.div(aa, bb.mul(us, us)), bb_)));
        Value rhs = bb.sub(bb.add(bb.neg(lam), bb.mul(safe_k, loglam)),
                           bb.unary("chlo.lgamma", bb.add(safe_k, k(1))));
        Value large_done = bb.or_(quick, bb.and_(bb.not_(reject), bb.compare(lhs, rhs, Cmp::LE)));
        Value finished = bb.select(large, large_done, small_done);
        Value value = bb.select(large, kk, small_value);
        Value pending = bb.not_(v[1]);
        Value take = bb.and_(pending, finished);
        Value sample = bb.select(take, value, v[0]);
        // A small rate that goes on counts this factor.
        Value counted = bb.and_(bb.and_(pending, bb.not_(finished)), bb.not_(large));
        sample = bb.select(counted, bb.add(sample, k(1)), sample);
        return Values{sample, bb.or_(v[1], finished), prod, bb.add(v[3], bb.constant_int(1, DType::S32)), v[4], v[5],
                      lam};
      });
  return Values{b.convert(st[0], o.dtype)};
}, /*needs_rng=*/true);

}  // namespace
}  // namespace tt::lowering
