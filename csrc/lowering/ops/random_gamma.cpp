// Gamma-distributed samples on the device's counter-based generator:
// _standard_gamma(alpha) (Gamma(alpha, 1), what torch.distributions.Gamma
// samples) and _sample_dirichlet(alpha) (gammas normalised over the last
// dim). Marsaglia and Tsang's method: for a = alpha (alpha + 1 when
// alpha < 1), d = a - 1/3 and c = 1 / sqrt(9d), draw x ~ N(0, 1) and
// u ~ U(0, 1) until v = (1 + cx)^3 > 0 and log u < x^2/2 + d - dv + d log v,
// then d*v is the sample; alpha < 1 multiplies by U^(1/alpha). Every element
// retries in lockstep (a while loop, at most kMaxRounds; acceptance is above
// 95% per round). Round k draws under its own key (seed + k * kKeyStep) at
// the op's reserved counters, so no two calls share random bits. Samples are
// at least the dtype's smallest normal number, as on the CPU. The numbers
// differ from the CPU's (another generator); their distribution is the same.
#include <limits>

#include "lowering/helpers.h"
#include "lowering/random_bits.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

constexpr int64_t kMaxRounds = 64;
constexpr int64_t kKeyStep = 0x632BE59BD9B4E019;  // odd; keys of different rounds never meet

Value key_for(Builder& b, Value seed, Value round, int64_t lane) {
  return round_key(b, seed, round, lane, kKeyStep);
}

Context with_key(Value seed, Value offset) {
  Context c;
  c.rng_seed = seed;
  c.rng_offset = offset;
  return c;
}

// Gamma(alpha, 1) samples of alpha's shape, in `ct` (f32 or f64).
Value gamma_samples(Builder& b, const Context& c, Value alpha, DType ct) {
  const Shape& s = alpha.shape();
  auto k = [&](double v) { return b.constant(v, ct, s); };
  Value boost = b.compare(alpha, k(1), Cmp::LT);
  Value a = b.select(boost, b.add(alpha, k(1)), alpha);
  Value d = b.sub(a, k(1.0 / 3.0));
  Value cc = b.rsqrt(b.mul(k(9), d));
  Values st = b.while_loop(
      {k(0), b.constant_int(0, DType::Pred, s), b.constant_int(0, DType::S32), c.rng_seed, c.rng_offset, d, cc},
      [](Builder& bb, const Values& v) {
        std::vector<int64_t> dims(v[1].shape().size());
        for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
        Value all_done = bb.reduce(v[1], bb.constant_int(1, DType::Pred), dims, "stablehlo.and");
        Value more = bb.compare(v[2], bb.constant_int(kMaxRounds, DType::S32), Cmp::LT);
        return Values{bb.and_(bb.not_(all_done), more)};
      },
      [ct](Builder& bb, const Values& v) {
        const Shape& s = v[0].shape();
        auto k = [&](double x) { return bb.constant(x, ct, s); };
        Value x = standard_normal(bb, with_key(key_for(bb, v[3], v[2], 0), v[4]), s, ct);
        Value u = uniform01(bb, with_key(key_for(bb, v[3], v[2], 1), v[4]), s, ct);
        Value d = v[5], cc = v[6];
        Value t = bb.add(k(1), bb.mul(cc, x));
        Value vv = bb.mul(bb.mul(t, t), t);
        Value positive = bb.compare(vv, k(0), Cmp::GT);
        Value safe_v = bb.select(positive, vv, k(1));
        Value bound = bb.add(bb.add(bb.mul(k(0.5), bb.mul(x, x)), d),
                             bb.mul(d, bb.sub(bb.log(safe_v), safe_v)));
        Value accept = bb.and_(positive, bb.compare(bb.log(bb.sub(k(1), u)), bound, Cmp::LT));
        Value take = bb.and_(accept, bb.not_(v[1]));
        return Values{bb.select(take, bb.mul(d, safe_v), v[0]), bb.or_(v[1], accept),
                      bb.add(v[2], bb.constant_int(1, DType::S32)), v[3], v[4], d, cc};
      });
  // Elements still undecided after kMaxRounds (probability < 0.05^64) keep d.
  Value sample = b.select(st[1], st[0], d);
  Value u = uniform01(b, with_key(key_for(b, c.rng_seed, b.constant_int(kMaxRounds, DType::S32), 0), c.rng_offset),
                      s, ct);
  Value shrink = b.binary("stablehlo.power", b.sub(k(1), u), b.div(k(1), alpha));
  sample = b.select(boost, b.mul(sample, shrink), sample);
  double tiny = ct == DType::F64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  return b.max(sample, k(tiny));
}

DType sample_type(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

TT_RULE({"aten::_standard_gamma"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = c.out();
  if (!hlo::is_float(o.dtype)) throw LoweringError("_standard_gamma of a non-floating-point tensor");
  DType ct = sample_type(o.dtype);
  return Values{b.convert(gamma_samples(b, c, b.convert(a[0].value(), ct), ct), o.dtype)};
}, /*needs_rng=*/true);

// Dirichlet(alpha) over the last dim: gammas divided by their sum.
// It has no meta kernel: the result is typed like alpha.
TT_RULE({"aten::_sample_dirichlet"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& o = a[0].value().type;
  if (!hlo::is_float(o.dtype)) throw LoweringError("_sample_dirichlet of a non-floating-point tensor");
  if (o.shape.empty() || o.numel() == 0) return Values{a[0].value()};
  DType ct = sample_type(o.dtype);
  Value g = gamma_samples(b, c, b.convert(a[0].value(), ct), ct);
  const int64_t last = static_cast<int64_t>(o.shape.size()) - 1;
  Value sum = expand_reduced(b, reduce_sum(b, g, {last}), o.shape, {last});
  return Values{b.convert(b.div(g, sum), o.dtype)};
}, /*needs_rng=*/true);

}  // namespace
}  // namespace tt::lowering
