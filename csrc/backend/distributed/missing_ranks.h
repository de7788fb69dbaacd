// Which ranks did not reach a collective that failed. Each rank whose
// collective number `seq` failed records it in the group's status store,
// waits up to `grace` for its peers' records, and names the ranks that
// recorded nothing as recent: they exited, hang elsewhere, or are late.
// Costs nothing until a collective fails.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace tt::backend::dist {

// ", ranks that did not reach it: [1, 3]", or "" when every rank reported
// (or the store itself failed).
std::string missing_ranks(c10d::Store& store, int rank, int world, uint64_t seq, std::chrono::milliseconds grace);

}  // namespace tt::backend::dist
