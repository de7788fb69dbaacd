// Blockwise scaled dot-product attention: one stablehlo.while loop over key
// blocks of kBlockKeys keys (used past kDenseMaxKeys keys), so that memory grows with L + S instead of L * S.
//
// Forward (online softmax): for each key block j, with s_j = scale * q k_j^T
// + bias_j (B, Hk, G*L, block),
//   m' = max(m, rowmax(s_j)),  a = exp(m - m'),  p = exp(s_j - m'),
//   l' = a * l + rowsum(p),    acc' = a * acc + p v_j,
// and at the end out = acc / l, logsumexp = m + log(l). While a row has seen
// no unmasked key its max is -inf; the shift is then 0 so that exp gives 0,
// never nan, and a row that masks every key ends with zeros and -inf, as
// the dense lowering and PyTorch's math path give.
// Backward, for each key block j: p = exp(s_j - logsumexp),
//   dV_j = p^T dO,  dS = scale * p * (dO V_j^T - rowsum(dO * O)),
//   dQ += dS K_j,   dK_j = dS^T Q,
// so dQ accumulates in the loop and dK, dV are written block by block.
// Keys are padded up to a whole number of blocks; padded keys are masked.
// The bias of a block is the matching slice of attn_mask (converted to an
// additive f32 bias one block at a time, so a boolean mask stays boolean in
// memory) and the causal triangle, computed from indices.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>

#include "lowering/ops/attention_common.h"

namespace tt::lowering::attention {

// Measured on XLA's CPU plugin, this machine (2 cores shared with other
// builds, so each figure is the best of 2-3 interleaved runs), float32,
// B=1, H=4, E=64, forward + backward, with the helpers in
// benchmarks/attention_memory.py (torch_tpu._sdpa_path.forced picks the path).
//
// Keys per block: at L = S = 2048 a step took 0.89 s with 128 keys per
// block, 0.98 s with 256, 1.17 s with 512 and 1024; at 4096, 2.6 s with
// 128, 3.3 s with 256, 3.6 s with 512 and 3.5 s with 1024. Smaller blocks
// also keep the (L x block) tiles small.
constexpr int64_t kBlockKeys = 128;

// Dense up to this many keys: at L = S, dense/blockwise step time was 0.89
// at 128 keys, 1.04 at 256, 1.19 at 512 and 2.46 at 1024.
constexpr int64_t kDenseMaxKeys = 256;

// Dense below this many queries: one query row (decoding) against 4096 keys
// ran 1.6x faster dense (forward), while 16 rows ran 1.4x faster blockwise;
// with few rows the dense score matrix is small anyway (L x S).
constexpr int64_t kBlockwiseMinQueries = 16;

namespace {

using hlo::Cmp;

std::atomic<int> g_path{static_cast<int>(Path::Auto)};
std::atomic<int64_t> g_block_keys{0};

Value neg_inf(Builder& b, DType t, const Shape& s) { return b.constant(-INFINITY, t, s); }

// The grouped (B, Hk, G*L, n) form of a value shaped (B, Hq, L, n).
Value grouped(Builder& b, const Geometry& g, Value x) { return b.reshape(x, g.grouped(x.shape()[3])); }

// attn_mask as rank 4, its key dim padded with 0 / false to `padded` keys when
// it has one (padded keys are masked by their index anyway). Invalid when
// there is no mask.
Value prepared_mask(Builder& b, const Call& c, int64_t padded) {
  if (!c.mask || c.mask->is_none()) return Value{};
  Value m = c.mask->value();
  Shape s = m.shape();
  if (s.size() > 4) throw LoweringError("scaled_dot_product_attention: attn_mask has more than 4 dims");
  while (s.size() < 4) s.insert(s.begin(), 1);
  m = b.reshape(m, s);
  if (s[3] != 1 && padded != s[3]) {
    Value zero = m.dtype() == DType::Pred ? b.constant_int(0, DType::Pred) : b.constant(0, m.dtype());
    m = b.pad(m, zero, {0, 0, 0, 0}, {0, 0, 0, padded - s[3]}, {0, 0, 0, 0});
  }
  return m;
}

// Scores of key block `start` (0-d s32, the block's first key): scale * q k^T,
// -inf where the mask, the causal triangle or the padding removes a key.
// `mask` is the prepared mask (or invalid); kb is the key block.
Value block_scores(Builder& b, const Call& c, int64_t block, Value q, Value kb, Value mask, Value start) {
  const Geometry& g = c.g;
  DType acc = c.acc;
  Value sc = b.dot_general(q, kb, {0, 1}, {0, 1}, {3}, {3}, acc, matmul_precision());  // (B, Hk, GL, block)
  Shape ss = sc.shape();
  sc = b.mul(sc, b.constant(c.scale, acc, ss));
  Shape full{g.batch, g.hq, g.l, block};
  if (mask.valid()) {
    Shape ms = mask.shape();
    if (ms[3] != 1) {
      Value z = b.constant_int(0, DType::S32);
      mask = b.dynamic_slice(mask, {z, z, z, start}, {ms[0], ms[1], ms[2], block});
    }
    Value m = b.broadcast_in_dim(mask, full, {0, 1, 2, 3});
    if (m.dtype() == DType::Pred)
      sc = b.select(grouped(b, g, m), sc, neg_inf(b, acc, ss));
    else
      sc = b.add(sc, grouped(b, g, b.convert(m, acc)));
  }
  // Which (query, key) pairs stay: keys inside S, and with is_causal key <= query.
  bool padded = (g.s % block) != 0;
  if (padded || c.causal) {
    Shape lk{g.l, block};
    Value key = b.add(b.iota(Type{DType::S32, lk}, 1), b.broadcast_in_dim(start, lk, {}));
    Value keep;
    if (padded) keep = b.compare(key, b.constant_int(g.s, DType::S32, lk), Cmp::LT);
    if (c.causal) {
      Value tri = b.compare(key, b.iota(Type{DType::S32, lk}, 0), Cmp::LE);
      keep = keep.valid() ? b.and_(keep, tri) : tri;
    }
    keep = grouped(b, g, b.broadcast_in_dim(keep, full, {2, 3}));
    sc = b.select(keep, sc, neg_inf(b, acc, ss));
  }
  return sc;
}

struct Blocks {
  int64_t size, count, padded;
};

Blocks blocks_of(const Geometry& g) {
  int64_t size = block_keys();
  size = std::max<int64_t>(1, std::min(size, g.s));
  int64_t count = (g.s + size - 1) / size;
  return {size, count, count * size};
}

// x (B, Hk, S, n) padded with zeros to `padded` keys.
Value pad_keys(Builder& b, Value x, int64_t padded) {
  int64_t s = x.shape()[2];
  if (s == padded) return x;
  return b.pad(x, b.constant(0, x.dtype()), {0, 0, 0, 0}, {0, 0, padded - s, 0}, {0, 0, 0, 0});
}

Value key_block(Builder& b, Value x, Value start, int64_t block) {
  Value z = b.constant_int(0, DType::S32);
  const Shape& s = x.shape();
  return b.dynamic_slice(x, {z, z, start, z}, {s[0], s[1], block, s[3]});
}

Value rows(Builder& b, Value r, const Shape& s) { return b.broadcast_in_dim(r, s, {0, 1, 2}); }

// What the forward and the backward loops start from: the grouped query,
// key and value padded to whole blocks, the prepared mask (invalid when
// none), and the shape of one value per query row.
struct BlockInputs {
  Blocks bl;
  Value q, k, v, mask;
  Shape rows;
};

BlockInputs block_inputs(Builder& b, const Call& c) {
  const Geometry& g = c.g;
  Blocks bl = blocks_of(g);
  return BlockInputs{bl, grouped(b, g, c.q), pad_keys(b, c.k, bl.padded), pad_keys(b, c.v, bl.padded),
                     prepared_mask(b, c, bl.padded), Shape{g.batch, g.hk, g.groups * g.l}};
}

// Runs `step` once per key block. The loop carries `carried` (element 0 is
// the block number, an s32 scalar) and, when there is one, the mask; `step`
// gets the carried values and the mask (invalid when none) and returns the
// next carried values.
using BlockStep = std::function<Values(Builder&, const Values& carried, const Value& mask)>;
Values loop_over_key_blocks(Builder& b, Values carried, const Value& mask, int64_t count, const BlockStep& step) {
  const size_t n = carried.size();
  if (mask.valid()) carried.push_back(mask);
  Values r = b.while_loop(
      carried,
      [count](Builder& bb, const Values& st) {
        return Values{bb.compare(st[0], bb.constant_int(count, DType::S32), Cmp::LT)};
      },
      [n, &step](Builder& bb, const Values& st) {
        Value m = st.size() > n ? st[n] : Value{};
        Values next = step(bb, Values(st.begin(), st.begin() + n), m);
        if (m.valid()) next.push_back(m);
        return next;
      });
  r.resize(n);
  return r;
}

}  // namespace

void set_path_override(Path path, int64_t block) {
  g_path = static_cast<int>(path);
  g_block_keys = block;
}
Path path_override() { return static_cast<Path>(g_path.load()); }
int64_t block_keys() {
  int64_t b = g_block_keys.load();
  return b > 0 ? b : kBlockKeys;
}

bool use_blockwise(const Geometry& g) {
  if (g.s == 0 || g.l == 0) return false;
  switch (path_override()) {
    case Path::Dense: return false;
    case Path::Blockwise: return true;
    default: return g.s > kDenseMaxKeys && g.l >= kBlockwiseMinQueries;
  }
}

Values blockwise_forward(Builder& b, const Call& c) {
  const Geometry& g = c.g;
  DType acc = c.acc;
  BlockInputs in = block_inputs(b, c);
  const Shape rs = in.rows, os = g.grouped(g.ev);
  const int64_t block = in.bl.size;
  Values state{b.constant_int(0, DType::S32), neg_inf(b, acc, rs), b.constant(0, acc, rs), b.constant(0, acc, os),
               in.q, in.k, in.v};
  Values r = loop_over_key_blocks(
      b, state, in.mask, in.bl.count,
      [&c, block, acc, rs, os](Builder& bb, const Values& st, const Value& mask) {
        Value i = st[0], m = st[1], l = st[2], o = st[3], q = st[4], k = st[5], v = st[6];
        Value start = bb.mul(i, bb.constant_int(block, DType::S32));
        Value sc = block_scores(bb, c, block, q, key_block(bb, k, start, block), mask, start);
        Shape ss = sc.shape();
        Value m_new = bb.max(m, reduce_max(bb, sc, {3}));
        Value dead = bb.compare(m_new, neg_inf(bb, acc, rs), Cmp::EQ);
        Value shift = bb.select(dead, bb.constant(0, acc, rs), m_new);
        Value alpha = bb.exp(bb.sub(m, shift));
        Value p = bb.exp(bb.sub(sc, rows(bb, shift, ss)));
        Value l_new = bb.add(bb.mul(alpha, l), reduce_sum(bb, p, {3}));
        Value pv = bb.dot_general(p, key_block(bb, v, start, block), {0, 1}, {0, 1}, {3}, {2}, acc,
                                  matmul_precision());
        Value o_new = bb.add(bb.mul(rows(bb, alpha, os), o), pv);
        return Values{bb.add(i, bb.constant_int(1, DType::S32)), m_new, l_new, o_new, q, k, v};
      });
  Value m = r[1], l = r[2], o = r[3];
  Value dead = b.compare(l, b.constant(0, acc, rs), Cmp::EQ);
  Value safe_l = b.select(dead, b.constant(1, acc, rs), l);
  Value out = b.div(o, rows(b, safe_l, os));
  Value lse = b.select(dead, neg_inf(b, acc, rs), b.add(m, b.log(safe_l)));
  return Values{b.reshape(out, {g.batch, g.hq, g.l, g.ev}), b.reshape(lse, {g.batch, g.hq, g.l})};
}

Values blockwise_backward(Builder& b, const Call& c, Value dout, Value out, Value lse) {
  const Geometry& g = c.g;
  DType acc = c.acc;
  BlockInputs in = block_inputs(b, c);
  const Shape rs = in.rows;
  Value q = in.q, k = in.k, v = in.v;
  Value dO = grouped(b, g, dout);
  Value delta = reduce_sum(b, b.mul(dO, grouped(b, g, out)), {3});
  // A row that masked every key has logsumexp -inf and all scores -inf:
  // shifting by 0 gives p = 0 there.
  Value l = b.reshape(lse, rs);
  Value shift = b.select(b.compare(l, neg_inf(b, acc, rs), Cmp::EQ), b.constant(0, acc, rs), l);
  Value dq = b.constant(0, acc, q.shape());
  Value dk = b.constant(0, acc, k.shape()), dv = b.constant(0, acc, v.shape());
  Values state{b.constant_int(0, DType::S32), dq, dk, dv, q, k, v, dO, delta, shift};
  const int64_t block = in.bl.size;
  Values r = loop_over_key_blocks(
      b, state, in.mask, in.bl.count,
      [&c, block, acc](Builder& bb, const Values& st, const Value& mask) {
        Value i = st[0], dq = st[1], dk = st[2], dv = st[3], q = st[4], k = st[5], v = st[6];
        Value dO = st[7], delta = st[8], shift = st[9];
        std::string prec = matmul_precision();
        Value start = bb.mul(i, bb.constant_int(block, DType::S32));
        Value kb = key_block(bb, k, start, block), vb = key_block(bb, v, start, block);
        Value sc = block_scores(bb, c, block, q, kb, mask, start);
        Shape ss = sc.shape();
        Value p = bb.exp(bb.sub(sc, rows(bb, shift, ss)));
        Value dvb = bb.dot_general(p, dO, {0, 1}, {0, 1}, {2}, {2}, acc, prec);  // (B, Hk, block, Ev)
        Value dp = bb.dot_general(dO, vb, {0, 1}, {0, 1}, {3}, {3}, acc, prec);  // (B, Hk, GL, block)
        Value ds = bb.mul(p, bb.sub(dp, rows(bb, delta, ss)));
        ds = bb.mul(ds, bb.constant(c.scale, acc, ss));
        dq = bb.add(dq, bb.dot_general(ds, kb, {0, 1}, {0, 1}, {3}, {2}, acc, prec));  // (B, Hk, GL, E)
        Value dkb = bb.dot_general(ds, q, {0, 1}, {0, 1}, {2}, {2}, acc, prec);        // (B, Hk, block, E)
        Value z = bb.constant_int(0, DType::S32);
        dk = bb.dynamic_update_slice(dk, dkb, {z, z, start, z});
        dv = bb.dynamic_update_slice(dv, dvb, {z, z, start, z});
        return Values{bb.add(i, bb.constant_int(1, DType::S32)), dq, dk, dv, q, k, v, dO, delta, shift};
      });
  Value dk_out = b.slice(r[2], {0, 0, 0, 0}, {g.batch, g.hk, g.s, g.e});
  Value dv_out = b.slice(r[3], {0, 0, 0, 0}, {g.batch, g.hk, g.s, g.ev});
  return Values{b.reshape(r[1], {g.batch, g.hq, g.l, g.e}), dk_out, dv_out};
}

}  // namespace tt::lowering::attention
