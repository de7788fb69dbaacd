#include "backend/bindings/stats_bindings.h"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "backend/pipeline/cpu_fallback.h"
#include "backend/pipeline/fused_cluster.h"
#include "backend/pipeline/program_runner.h"
#include "runtime/compile_cache.h"
#include "runtime/runtime.h"
#include "runtime/shared_cache.h"

namespace py = pybind11;

namespace tt::backend {
namespace {

py::dict mode_counters(const ModeCounters& c) {
  py::dict d;
  d["hits"] = c.hits;
  d["misses"] = c.misses;
  d["compiles"] = c.compiles;
  d["entries"] = c.entries;
  d["evictions"] = c.evictions;
  d["compile_seconds"] = c.compile_seconds;
  return d;
}

// The in-memory program cache: totals over the modes, each mode's own
// counters under "modes", and buffer donation.
py::dict programs() {
  auto per_mode = program_cache_stats();
  ModeCounters total;
  py::dict modes;
  for (size_t i = 0; i < per_mode.size(); ++i) {
    const auto& c = per_mode[i];
    modes[program_mode_name(static_cast<ProgramMode>(i))] = mode_counters(c);
    total.hits += c.hits;
    total.misses += c.misses;
    total.compiles += c.compiles;
    total.entries += c.entries;
    total.evictions += c.evictions;
    total.compile_seconds += c.compile_seconds;
  }
  py::dict d = mode_counters(total);
  d["modes"] = modes;
  auto donation = donation_stats();
  d["donated"] = donation.donated;
  d["donation_copies"] = donation.copied;
  return d;
}

// One tier of the persistent compile cache: this process's counters and the
// folder's current size.
py::dict cache_tier(runtime::CompileCache& cache) {
  auto s = cache.stats();
  int64_t bytes = 0, entries = 0;
  cache.Usage(&bytes, &entries);
  py::dict d;
  d["dir"] = cache.config().dir;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["rejected"] = s.rejected;
  d["writes"] = s.writes;
  d["write_errors"] = s.write_errors;
  d["evictions"] = s.evictions;
  d["bytes"] = bytes;
  d["entries"] = entries;
  d["load_seconds"] = s.load_seconds;
  d["store_seconds"] = s.store_seconds;
  return d;
}

// The local tier; before the runtime starts nothing was compiled, so its
// counters are zeros (the folder is not read either).
py::object persistent_cache() {
  if (!runtime::Runtime::IsInitialized()) {
    py::dict d;
    for (const char* k : {"hits", "misses", "rejected", "writes", "write_errors", "evictions", "bytes", "entries"})
      d[k] = 0;
    d["dir"] = py::none();
    d["load_seconds"] = 0.0;
    d["store_seconds"] = 0.0;
    return d;
  }
  return cache_tier(runtime::Runtime::Get().compile_cache());
}

// The shared tier, or None when TORCH_TPU_SHARED_CACHE_DIR is unset. It is
// configured when the runtime starts, so asking starts the runtime.
py::object shared_cache() {
  runtime::Runtime::Get();
  runtime::CompileCache* shared = runtime::SharedCompileCache();
  return shared ? py::object(cache_tier(*shared)) : py::object(py::none());
}

py::dict fused_counters() {
  auto s = fused::stats();
  const auto programs = program_cache_stats()[static_cast<size_t>(ProgramMode::Fused)];
  py::dict d;
  d["ops"] = s.ops;
  d["clusters"] = s.clusters;
  d["compiles"] = programs.compiles;
  d["hits"] = programs.hits;
  d["empty"] = s.empty;
  d["compile_seconds"] = programs.compile_seconds;
  d["pending_ops"] = s.pending_ops;
  d["flush_reasons"] = s.flush_reasons;
  return d;
}

}  // namespace

void bind_stats(py::module_& m) {
  m.def("_stats", [](const std::string& section) -> py::object {
    if (section == "programs") return programs();
    if (section == "persistent_cache") return persistent_cache();
    if (section == "shared_cache") return shared_cache();
    if (section == "fused") return fused_counters();
    if (section == "fallbacks") return py::cast(fallback_counts());
    throw std::invalid_argument("torch_tpu stats: no section '" + section +
                                "'; sections: programs, persistent_cache, shared_cache, fused, fallbacks");
  });
}

}  // namespace tt::backend
