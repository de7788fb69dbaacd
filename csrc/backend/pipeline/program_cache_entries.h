// The entries of the in-memory program cache (program_runner.cpp), one by
// one: torch.tpu._get_cache_stats().per_entry_stats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/pipeline/program_runner.h"

namespace tt::backend {

struct ProgramCacheEntry {
  std::string key;    // what the program is cached under (op, dtypes, shapes, settings; or a graph's hash)
  ProgramMode mode;
  int64_t reads = 0;  // cache hits on it since it was stored
};

// Most recently used first.
std::vector<ProgramCacheEntry> program_cache_entries();

}  // namespace tt::backend
