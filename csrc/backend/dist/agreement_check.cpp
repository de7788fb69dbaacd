#include "backend/dist/agreement_check.h"

#include "backend/dist/tpu_dist_work.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>

namespace tt::backend::dist {
namespace {

// Signature layout: a fixed header, then 2 * world split entries.
constexpr int kMaxDims = 6;
enum Field { kOp, kRoot, kDtype, kCount, kNumel, kRank, kDims, kShapeHash = kDims + kMaxDims, kHeader };

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

std::string describe(const int64_t* v, const char* my_op, int64_t my_op_id) {
  std::ostringstream o;
  o << (v[kOp] == my_op_id ? std::string(my_op) : op_name(v[kOp])) << " ";
  if (v[kRoot] >= 0) o << "root " << v[kRoot] << ", ";
  if (v[kCount] == 0) return o.str() + "no tensors";
  std::string dtype = v[kDtype] == -2 ? std::string("mixed dtypes")
                                      : std::string(c10::toString(static_cast<at::ScalarType>(v[kDtype])));
  if (v[kCount] == 1 && v[kRank] <= kMaxDims) {
    o << dtype << "[";
    for (int d = 0; d < v[kRank]; ++d) o << (d ? ", " : "") << v[kDims + d];
    o << "]";
  } else {
    o << v[kCount] << " tensors, " << dtype << ", " << v[kNumel] << " elements";
  }
  return o.str();
}

}  // namespace

bool agreement_check_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_DIST_CHECK");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

void agree(c10d::Backend& gloo, const Signature& mine, std::chrono::milliseconds timeout,
           const std::string& what, const std::function<std::string()>& on_failure) {
  const int world = gloo.getSize();
  std::vector<int64_t> sig = encode(mine, world);
  const int64_t len = static_cast<int64_t>(sig.size());
  std::vector<at::Tensor> in{at::tensor(sig, at::kLong)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < world; ++r) out[0].push_back(at::empty({len}, at::kLong));
  c10d::AllgatherOptions opts;
  opts.timeout = timeout;
  try {
    gloo.allgather(out, in, opts)->wait();
  } catch (...) {
    std::string cause = error_text(std::current_exception());
    TORCH_CHECK(false, what, " failed: a rank of the group did not take part (it exited, did not arrive "
                "within the group's timeout of ", timeout.count(), " ms, or called a different collective)",
                on_failure ? on_failure() : std::string(), ". gloo said: ", cause);
  }

  const int64_t* mine_v = sig.data();
  bool same = true;
  for (int r = 0; r < world && same; ++r) {
    const int64_t* v = out[0][r].const_data_ptr<int64_t>();
    for (int f = 0; f < kHeader; ++f) same = same && v[f] == mine_v[f];
  }
  if (!same) {
    std::ostringstream m;
    m << "tpu_dist " << mine.op << ": the ranks passed different arguments (every rank must pass the same "
      << "collective, root, dtypes and shapes):";
    for (int r = 0; r < world; ++r)
      m << "\n  rank " << r << ": " << describe(out[0][r].const_data_ptr<int64_t>(), mine.op, mine_v[kOp]);
    TORCH_CHECK(false, m.str());
  }
  if (mine.send_splits.empty()) return;
  for (int i = 0; i < world; ++i) {
    const int64_t* vi = out[0][i].const_data_ptr<int64_t>();
    for (int j = 0; j < world; ++j) {
      const int64_t* vj = out[0][j].const_data_ptr<int64_t>();
      int64_t sent = vi[kHeader + j], expected = vj[kHeader + world + i];
      TORCH_CHECK(sent == expected, "tpu_dist ", mine.op, ": rank ", i, " sends ", sent, " rows to rank ", j,
                  ", which expects ", expected, " rows from it (input and output split sizes must match "
                  "across ranks)");
    }
  }
}

}  // namespace tt::backend::dist
