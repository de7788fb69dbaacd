#include "lowering/random_bits.h"

#include <cmath>

#include "lowering/helpers.h"

namespace tt::lowering {

namespace {

Value u32(Builder& b, uint32_t v, const Shape& shape) {
  return b.constant_int(static_cast<int64_t>(v), DType::U32, shape);
}

Value rotl(Builder& b, Value x, int r) {
  Value l = b.binary("stablehlo.shift_left", x, u32(b, r, x.shape()));
  Value rr = b.binary("stablehlo.shift_right_logical", x, u32(b, 32 - r, x.shape()));
  return b.or_(l, rr);
}

std::pair<Value, Value> split64(Builder& b, Value x) {
  Value lo = b.convert(x, DType::U32);
  Value hi = b.convert(b.binary("stablehlo.shift_right_logical", x, b.constant_int(32, DType::U64, x.shape())),
                       DType::U32);
  return {lo, hi};
}

}  // namespace

std::pair<Value, Value> threefry_bits(Builder& b, Value seed, Value offset, const Shape& shape) {
  const Shape flat{numel(shape)};
  Value counter = b.add(b.iota(Type{DType::U64, flat}, 0), b.broadcast_in_dim(offset, flat, {}));
  auto [c0, c1] = split64(b, counter);
  auto [k0s, k1s] = split64(b, seed);
  Value k0 = b.broadcast_in_dim(k0s, flat, {});
  Value k1 = b.broadcast_in_dim(k1s, flat, {});
  Value k2 = b.binary("stablehlo.xor", b.binary("stablehlo.xor", k0, k1), u32(b, 0x1BD11BDA, flat));
  Value ks[3] = {k0, k1, k2};
  static const int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  Value x0 = b.add(c0, ks[0]), x1 = b.add(c1, ks[1]);
  for (int g = 0; g < 5; ++g) {
    for (int r = 0; r < 4; ++r) {
      x0 = b.add(x0, x1);
      x1 = rotl(b, x1, kRot[g % 2][r]);
      x1 = b.binary("stablehlo.xor", x1, x0);
    }
    x0 = b.add(x0, ks[(g + 1) % 3]);
    x1 = b.add(b.add(x1, ks[(g + 2) % 3]), u32(b, static_cast<uint32_t>(g + 1), flat));
  }
  return {b.reshape(x0, shape), b.reshape(x1, shape)};
}

// Top mantissa-width bits of `bits` scaled to [0, 1).
static Value bits_to_unit(Builder& b, Value bits, DType compute) {
  Value top = b.binary("stablehlo.shift_right_logical", bits, u32(b, 8, bits.shape()));
  return b.mul(b.convert(top, compute), b.constant(1.0 / 16777216.0, compute, bits.shape()));
}

Value uniform01(Builder& b, const Context& c, const Shape& shape, DType t) {
  DType compute = t == DType::F64 ? DType::F64 : DType::F32;
  auto [x0, x1] = threefry_bits(b, c.rng_seed, c.rng_offset, shape);
  Value u;
  if (compute == DType::F64) {
    // 53 bits: 32 from x0 and 21 from x1.
    Value hi = b.convert(x0, DType::F64);
    Value lo = b.convert(b.binary("stablehlo.shift_right_logical", x1, u32(b, 11, shape)), DType::F64);
    u = b.mul(b.add(b.mul(hi, b.constant(2097152.0, DType::F64, shape)), lo),
              b.constant(1.0 / 9007199254740992.0, DType::F64, shape));
  } else {
    u = bits_to_unit(b, x0, compute);
  }
  Value r = b.convert(u, t);
  // Rounding to a narrower type can produce 1.0; keep the interval half-open.
  if (t == DType::F16 || t == DType::BF16) {
    Value one = b.constant(1.0, t, shape);
    r = b.select(b.compare(r, one, hlo::Cmp::GE), b.constant(0.0, t, shape), r);
  }
  return r;
}

Value standard_normal(Builder& b, const Context& c, const Shape& shape, DType t) {
  DType compute = t == DType::F64 ? DType::F64 : DType::F32;
  auto [x0, x1] = threefry_bits(b, c.rng_seed, c.rng_offset, shape);
  // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1).
  Value u1 = b.add(bits_to_unit(b, x0, compute), b.constant(1.0 / 16777216.0, compute, shape));
  Value u2 = bits_to_unit(b, x1, compute);
  Value radius = b.sqrt(b.mul(b.constant(-2.0, compute, shape), b.log(u1)));
  Value angle = b.mul(b.constant(2.0 * M_PI, compute, shape), u2);
  return b.convert(b.mul(radius, b.unary("stablehlo.cosine", angle)), t);
}

Value round_key(Builder& b, Value seed, Value round, int64_t lane, int64_t step) {
  Value k = b.add(b.mul(b.convert(round, DType::U64), b.constant_int(2, DType::U64)),
                  b.constant_int(lane, DType::U64));
  return b.add(seed, b.mul(k, b.constant_int(step, DType::U64)));
}

}  // namespace tt::lowering
