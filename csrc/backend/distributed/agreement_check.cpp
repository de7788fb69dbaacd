#include "backend/distributed/agreement_check.h"

#include "backend/distributed/host_pool.h"
#include "backend/distributed/tpu_dist_work.h"
#include "settings/settings.h"

#include <c10/util/Exception.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>

namespace tt::backend::dist {
namespace {

// Signature layout: a fixed header, then 2 * world split entries.
constexpr int kMaxDims = 6;
enum Field { kOp, kRoot, kDtype, kCount, kNumel, kRank, kReduceOp, kDims, kShapeHash = kDims + kMaxDims, kHeader };

int64_t op_id(const std::string& op) {
  return static_cast<int64_t>(std::hash<std::string>{}(op) & 0x7fffffffffffLL);
}

// The collective another rank called, from its id (every name the backend
// passes as Signature::op).
std::string op_name(int64_t id) {
  static const char* names[] = {"broadcast", "all_reduce", "all_reduce_coalesced", "reduce", "all_gather",
                                "all_gather_into_tensor", "all_gather_coalesced",
                                "all_gather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter",
                                "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "all_to_all_single",
                                "all_to_all", "barrier"};
  for (const char* n : names)
    if (op_id(n) == id) return n;
  return "an unknown collective";
}

std::vector<int64_t> encode(const Signature& s, int world) {
  std::vector<int64_t> v(kHeader + 2 * world, 0);
  v[kOp] = op_id(s.op);
  v[kRoot] = s.root;
  v[kCount] = static_cast<int64_t>(s.tensors.size());
  v[kReduceOp] = s.reduce_op;
  v[kDtype] = s.tensors.empty() ? -1 : static_cast<int64_t>(s.tensors[0].scalar_type());
  v[kRank] = s.tensors.empty() ? -1 : s.tensors[0].dim();
  size_t hash = 0;
  for (const auto& t : s.tensors) {
    v[kNumel] += t.numel();
    if (t.scalar_type() != s.tensors[0].scalar_type()) v[kDtype] = -2;  // mixed dtypes
    for (auto d : t.sizes()) hash = hash * 1000003u + static_cast<size_t>(d) + 1;
    hash = hash * 31u + 7u;
  }
  v[kShapeHash] = static_cast<int64_t>(hash & 0x7fffffffffffLL);
  for (int d = 0; d < kMaxDims; ++d)
    v[kDims + d] = (s.tensors.size() == 1 && d < s.tensors[0].dim()) ? s.tensors[0].size(d) : -1;
  for (size_t j = 0; j < s.send_splits.size() && j < static_cast<size_t>(world); ++j) {
    v[kHeader + j] = s.send_splits[j];
    v[kHeader + world + j] = s.recv_splits[j];
  }
  return v;
}

const char* reduce_op_name(int64_t op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "an unknown reduction";
}

std::string describe(const int64_t* v, const char* my_op, int64_t my_op_id) {
  std::ostringstream o;
  o << (v[kOp] == my_op_id ? std::string(my_op) : op_name(v[kOp])) << " ";
  if (v[kRoot] >= 0) o << "root " << v[kRoot] << ", ";
  if (v[kCount] == 0) return o.str() + "no tensors";
  const std::string reduce = v[kReduceOp] >= 0 ? std::string(", op ") + reduce_op_name(v[kReduceOp]) : "";
  std::string dtype = v[kDtype] == -2 ? std::string("mixed dtypes")
                                      : std::string(c10::toString(static_cast<at::ScalarType>(v[kDtype])));
  if (v[kCount] == 1 && v[kRank] <= kMaxDims) {
    o << dtype << "[";
    for (int d = 0; d < v[kRank]; ++d) o << (d ? ", " : "") << v[kDims + d];
    o << "]";
  } else {
    o << v[kCount] << " tensors, " << dtype << ", " << v[kNumel] << " elements";
  }
  return o.str() + reduce;
}

}  // namespace

bool agreement_check_enabled() {
  static const bool on = [] {
    return settings::Bool(settings::Id::TORCH_TPU_DIST_CHECK);
  }();
  return on;
}

int64_t ExchangeData::block_bytes() const {
  if (!data.defined()) return 0;
  const int64_t n = static_cast<int64_t>(data.nbytes());
  return split_bytes > 0 ? std::min(split_bytes, n) : n;
}

at::Tensor agree(c10d::Backend& gloo, const Signature& mine, const ExchangeData& data, int64_t capacity,
                 std::chrono::milliseconds timeout, const std::string& what,
                 const std::function<std::string()>& on_failure) {
  const int world = gloo.getSize();
  std::vector<int64_t> sig = encode(mine, world);
  const int64_t sig_bytes = static_cast<int64_t>(sig.size() * sizeof(int64_t));
  const int64_t slot = sig_bytes + capacity;
  TORCH_CHECK(capacity >= 0 && capacity % 8 == 0, "tpu_dist: bad exchange capacity ", capacity);
  TORCH_CHECK(!data.data.defined() || (data.data.is_contiguous() && data.block_bytes() <= capacity),
              "tpu_dist: a block of ", data.block_bytes(), " bytes does not fit the exchange");
  // Pooled (host_pool.h): a fresh block of a MiB page-faults on every call.
  at::Tensor in = pooled_host_tensor({world * slot}, at::kByte);
  uint8_t* in_bytes = in.mutable_data_ptr<uint8_t>();
  const auto* src = data.data.defined() ? static_cast<const uint8_t*>(data.data.const_data_ptr()) : nullptr;
  const int64_t total = data.data.defined() ? static_cast<int64_t>(data.data.nbytes()) : 0;
  for (int j = 0; j < world; ++j) {
    uint8_t* block = in_bytes + j * slot;
    std::memcpy(block, sig.data(), sig_bytes);
    if (!src) continue;
    const int64_t begin = data.split_bytes > 0 ? std::min(total, j * data.split_bytes) : 0;
    const int64_t end = data.split_bytes > 0 ? std::min(total, begin + data.split_bytes) : total;
    if (end > begin) std::memcpy(block + sig_bytes, src + begin, end - begin);
  }
  at::Tensor out = pooled_host_tensor({world * slot}, at::kByte);
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  std::vector<int64_t> even;  // empty splits: equal blocks
  try {
    gloo.alltoall_base(out, in, even, even, opts)->wait();
  } catch (...) {
    std::string cause = error_text(std::current_exception());
    TORCH_CHECK(false, what, " failed: a rank of the group did not take part (it exited, did not arrive "
                "within the group's timeout of ", timeout.count(), " ms, or called a different collective)",
                on_failure ? on_failure() : std::string(), ". gloo said: ", cause);
  }
  const uint8_t* base = out.const_data_ptr<uint8_t>();
  auto header = [&](int r) { return reinterpret_cast<const int64_t*>(base + r * slot); };

  const int64_t* mine_v = sig.data();
  bool same = true;
  for (int r = 0; r < world && same; ++r) {
    const int64_t* v = header(r);
    for (int f = 0; f < kHeader; ++f) same = same && v[f] == mine_v[f];
  }
  if (!same) {
    std::ostringstream m;
    m << "tpu_dist " << mine.op << ": the ranks passed different arguments (every rank must pass the same "
      << "collective, root, reduce op, dtypes and shapes):";
    for (int r = 0; r < world; ++r)
      m << "\n  rank " << r << ": " << describe(header(r), mine.op, mine_v[kOp]);
    TORCH_CHECK(false, m.str());
  }
  at::Tensor payloads = out.view({world, slot}).narrow(1, sig_bytes, capacity);
  if (mine.send_splits.empty()) return payloads;
  for (int i = 0; i < world; ++i) {
    const int64_t* vi = header(i);
    for (int j = 0; j < world; ++j) {
      const int64_t* vj = header(j);
      int64_t sent = vi[kHeader + j], expected = vj[kHeader + world + i];
      TORCH_CHECK(sent == expected, "tpu_dist ", mine.op, ": rank ", i, " sends ", sent, " rows to rank ", j,
                  ", which expects ", expected, " rows from it (input and output split sizes must match "
                  "across ranks)");
    }
  }
  return payloads;
}

}  // namespace tt::backend::dist
