#include "backend/distributed/missing_ranks.h"

#include <sstream>
#include <thread>
#include <vector>

namespace tt::backend::dist {
namespace {

std::string key(int rank) { return "failed_at/" + std::to_string(rank); }

std::vector<uint8_t> encode(uint64_t seq) {
  std::string s = std::to_string(seq);
  return std::vector<uint8_t>(s.begin(), s.end());
}

uint64_t decode(const std::vector<uint8_t>& v) { return std::stoull(std::string(v.begin(), v.end())); }

}  // namespace

std::string missing_ranks(c10d::Store& store, int rank, int world, uint64_t seq, std::chrono::milliseconds grace) {
  try {
    store.set(key(rank), encode(seq));
    auto deadline = std::chrono::steady_clock::now() + grace;
    std::vector<int> missing;
    while (true) {
      missing.clear();
      for (int r = 0; r < world; ++r) {
        if (r == rank) continue;
        if (!store.check({key(r)}) || decode(store.get(key(r))) < seq) missing.push_back(r);
      }
      if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (missing.empty()) return "";
    std::ostringstream o;
    o << ", ranks that did not reach it: [";
    for (size_t i = 0; i < missing.size(); ++i) o << (i ? ", " : "") << missing[i];
    o << "]";
    return o.str();
  } catch (const std::exception&) {
    return "";  // the store went with the failure: say nothing more
  }
}

}  // namespace tt::backend::dist
