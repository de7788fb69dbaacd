#include "backend/pipeline/program_runner.h"

#include <atomic>

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>

#include "backend/device/generator.h"
#include "backend/device/oom_count.h"
#include "backend/device/stream_events.h"
#include "backend/device/tpu_device.h"
#include "backend/profiler/device_trace.h"
#include "lowering/device_check.h"
#include "settings/settings.h"

namespace tt::backend {
namespace {

// Every loaded executable holds JIT code mappings (about three on XLA's CPU
// plugin, against a kernel limit of ~65k per process), so the cache is
// bounded.
size_t cache_capacity() {
  static size_t cap = [] {
    return static_cast<size_t>(settings::Int(settings::Id::TORCH_TPU_PROGRAM_CACHE_ENTRIES));
  }();
  return cap;
}

struct Node {
  std::shared_ptr<CachedProgram> program;
  ProgramMode mode;
  std::list<const std::string*>::iterator use;  // position in g_use (front: most recent)
  int64_t reads = 0;                            // hits since stored (program_cache_entries())
};

std::mutex g_mu;
std::unordered_map<std::string, Node> g_programs;
std::list<const std::string*> g_use;  // keys of g_programs, most recently used first
ProgramCacheStats g_stats;

ModeCounters& counters(ProgramMode m) { return g_stats[static_cast<size_t>(m)]; }

void evict_past_capacity() {  // caller holds g_mu
  while (g_programs.size() > cache_capacity()) {
    auto it = g_programs.find(*g_use.back());
    counters(it->second.mode).evictions += 1;
    g_use.pop_back();
    g_programs.erase(it);
  }
}

}  // namespace

const char* program_mode_name(ProgramMode mode) {
  switch (mode) {
    case ProgramMode::Eager: return "eager";
    case ProgramMode::Fused: return "fused";
    case ProgramMode::Graph: return "graph";
    case ProgramMode::Collective: return "collective";
  }
  return "?";
}

std::shared_ptr<CachedProgram> find_program(const std::string& key, ProgramMode mode, bool need_exe) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_programs.find(key);
  if (it == g_programs.end() || (need_exe && !it->second.program->exe)) {
    counters(mode).misses += 1;
    return nullptr;
  }
  g_use.splice(g_use.begin(), g_use, it->second.use);
  counters(mode).hits += 1;
  it->second.reads += 1;
  return it->second.program;
}

void store_program(const std::string& key, ProgramMode mode, std::shared_ptr<CachedProgram> p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_programs.find(key);
  if (it != g_programs.end()) {  // a record-only entry now compiled, or a race between threads
    it->second.program = std::move(p);
    it->second.mode = mode;
    g_use.splice(g_use.begin(), g_use, it->second.use);
    return;
  }
  it = g_programs.emplace(key, Node{std::move(p), mode, {}}).first;
  g_use.push_front(&it->first);  // unordered_map keys do not move on rehash
  it->second.use = g_use.begin();
  evict_past_capacity();
}

std::atomic<int64_t> g_donated{0}, g_copied{0};

DonationStats donation_stats() { return {g_donated.load(), g_copied.load()}; }

std::vector<ProgramCacheEntry> program_cache_entries() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<ProgramCacheEntry> out;
  out.reserve(g_use.size());
  for (const std::string* key : g_use) {
    const Node& n = g_programs.at(*key);
    out.push_back({*key, n.mode, n.reads});
  }
  return out;
}

ProgramCacheStats program_cache_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  ProgramCacheStats s = g_stats;
  for (auto& c : s) c.entries = 0;
  for (const auto& kv : g_programs) s[static_cast<size_t>(kv.second.mode)].entries += 1;
  return s;
}

void program_cache_clear(std::optional<ProgramMode> mode) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto it = g_programs.begin(); it != g_programs.end();) {
    if (mode && it->second.mode != *mode) {
      ++it;
      continue;
    }
    g_use.erase(it->second.use);
    it = g_programs.erase(it);
  }
  if (mode) counters(*mode) = ModeCounters{};
  else g_stats = ProgramCacheStats{};
}

namespace {

// Compiles `text` for one device (`devices` empty) or one replica per device.
// Single-device programs compile with `overrides`, or the current ones.
runtime::ExecutablePtr compile_counted(const std::string& text, const std::vector<int>& devices, ProgramMode mode,
                                       const std::string& what, const std::string& hint,
                                       const runtime::CompileOverrides* overrides) {
  auto t0 = std::chrono::steady_clock::now();
  runtime::ExecutablePtr exe;
  try {
    exe = devices.empty()
              ? runtime::Runtime::Get().Compile(text, overrides ? *overrides : runtime::CurrentCompileOverrides())
              : runtime::Runtime::Get().CompileReplicated(text, devices);
  } catch (const runtime::Error& e) {
    TORCH_CHECK(false, "tpu: XLA could not compile ", what, ": ", e.what(), hint,
                settings::Bool(settings::Id::TORCH_TPU_DUMP_FAILED) ? "\n" + text : "");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!exe->from_disk()) {  // a load from the persistent cache is counted there (disk_hits)
    std::lock_guard<std::mutex> lock(g_mu);
    counters(mode).compiles += 1;
    counters(mode).compile_seconds += secs;
  }
  return exe;
}

}  // namespace

runtime::ExecutablePtr compile_program(const std::string& text, ProgramMode mode, const std::string& what,
                                       const std::string& hint, const runtime::CompileOverrides* overrides) {
  return compile_counted(text, {}, mode, what, hint, overrides);
}

runtime::ExecutablePtr replicated_program(const std::string& text, const std::vector<int>& devices,
                                          const std::string& what) {
  std::string key = "replicated";
  for (int d : devices) key += " " + std::to_string(d);
  key += "\n" + text;
  if (auto p = find_program(key, ProgramMode::Collective)) return p->exe;
  auto p = std::make_shared<CachedProgram>();
  p->exe = compile_counted(text, devices, ProgramMode::Collective, what, "", nullptr);
  store_program(key, ProgramMode::Collective, p);
  return p->exe;
}

bool donation_enabled() {
  static const bool on = [] {
    return settings::Bool(settings::Id::TORCH_TPU_DONATION);
  }();
  return on;
}

void ProgramArgs::set_aliased(size_t index, bool donate) {
  if (donate && donation_enabled()) donated_.push_back(index);
  else non_donatable_.push_back(static_cast<int64_t>(index));
}

void ProgramArgs::add(runtime::BufferPtr owned) {
  args_.push_back(owned.get());
  keep_.push_back(std::move(owned));
}

std::pair<runtime::BufferPtr, runtime::BufferPtr> rng_words(const std::optional<at::Generator>& gen, int device,
                                                            int64_t counters) {
  TpuGenerator* g = generator_or_default(gen, device);
  uint64_t seed, offset;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    seed = g->current_seed();
    offset = g->reserve(static_cast<uint64_t>(counters));
  }
  auto& rt = runtime_for(device);
  return {rt.FromHost(&seed, runtime::ElementType::U64, {}, device),
          rt.FromHost(&offset, runtime::ElementType::U64, {}, device)};
}

void ProgramArgs::add_rng(const std::optional<at::Generator>& gen, int device, int64_t counters) {
  auto [seed, offset] = rng_words(gen, device, counters);
  add(std::move(seed));
  add(std::move(offset));
}

bool launch_blocking() {
  static const bool on = [] {
    return settings::Bool(settings::Id::TORCH_TPU_LAUNCH_BLOCKING);
  }();
  return on;
}

namespace {

// A program's check flags, copied to the host as soon as the program is done
// (the copy is queued at launch), so a host wait only reads finished words.
struct PendingChecks {
  runtime::BufferPtr flags;
  CheckList checks;
  std::unique_ptr<std::vector<int64_t>> words;
  std::unique_ptr<runtime::Event> copied;  // null: the copy could not start

  PendingChecks(runtime::BufferPtr f, CheckList c)
      : flags(std::move(f)), checks(std::move(c)), words(std::make_unique<std::vector<int64_t>>(2 * checks->size())) {
    try {
      copied = flags->ToHostAsync(words->data(), words->size() * sizeof(int64_t));
    } catch (const runtime::Error&) {
      // the program itself failed; that error reaches its results' readers
    }
  }
  PendingChecks(PendingChecks&&) = default;
  PendingChecks& operator=(PendingChecks&&) = default;
  ~PendingChecks() {
    if (!copied) return;
    try {
      copied->Await();  // `words` must outlive the copy
    } catch (const runtime::Error&) {
    }
  }
};
std::mutex g_checks_mu;
std::vector<PendingChecks> g_checks;

// Keeps a program's check flags until the host next waits.
void defer_checks(runtime::BufferPtr flags, const CheckList& checks) {
  PendingChecks pending(std::move(flags), checks);
  bool now;
  {
    std::lock_guard<std::mutex> lock(g_checks_mu);
    g_checks.push_back(std::move(pending));
    // A long run of programs without a host wait: verify the backlog.
    now = launch_blocking() || g_checks.size() >= 1024;
  }
  if (now) verify_device_checks();
}

}  // namespace

void verify_device_checks() {
  std::vector<PendingChecks> pending;
  {
    std::lock_guard<std::mutex> lock(g_checks_mu);
    if (g_checks.empty()) return;
    pending.swap(g_checks);
  }
  for (auto& p : pending) {
    if (!p.copied) continue;
    try {
      p.copied->Await();
    } catch (const runtime::Error&) {
      p.copied.reset();
      continue;  // the program itself failed; that error reaches its results' readers
    }
    p.copied.reset();
    const std::vector<int64_t>& words = *p.words;
    for (size_t k = 0; k < p.checks->size(); ++k) {
      if (!words[2 * k]) continue;
      const lowering::CheckInfo& info = (*p.checks)[k];
      std::string msg = lowering::check_message(info, words[2 * k + 1]);
      switch (info.error) {
        case lowering::CheckError::Index: TORCH_CHECK_INDEX(false, msg);
        case lowering::CheckError::Value: TORCH_CHECK_VALUE(false, msg);
        case lowering::CheckError::Runtime: TORCH_CHECK(false, msg);
      }
    }
  }
}

std::vector<runtime::BufferPtr> run_program(const runtime::Executable& exe, const ProgramArgs& args, int device,
                                            const std::string& what, const CheckList& checks) {
  std::vector<runtime::BufferPtr> outs;
  profiler::DeviceEventPtr traced;  // set only while torch.profiler records tpu events
  if (profiler::recording()) traced = profiler::begin_program(what, device, args.list());
  try {
    outs = exe.Execute(args.list(), device, args.non_donatable_);
  } catch (const runtime::Error& e) {
    if (e.out_of_memory()) note_out_of_memory(device);
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), "tpu:", device, " out of memory running ", what, ": ",
                     e.what());
    TORCH_CHECK(false, "tpu: running ", what, " failed: ", e.what());
  }
  if (traced) profiler::end_program(traced, exe, outs);
  for (size_t i : args.donated_) args.args_.at(i)->MarkDonated();
  g_donated += static_cast<int64_t>(args.donated_.size());
  g_copied += static_cast<int64_t>(args.non_donatable_.size());
  if (launch_blocking()) {
    try {
      for (const auto& b : outs) b->BlockUntilReady();
    } catch (const runtime::Error& e) {
      TORCH_CHECK(false, "tpu: ", what, " failed on the device: ", e.what());
    }
  } else if (!outs.empty()) {
    track_pending(outs.back());
  }
  if (checks && !checks->empty() && !outs.empty()) {
    defer_checks(std::move(outs.back()), checks);
    outs.pop_back();
  }
  return outs;
}

std::vector<std::vector<runtime::BufferPtr>> run_replicated_program(
    const runtime::Executable& exe, const std::vector<std::vector<runtime::Buffer*>>& args, const std::string& what,
    const CheckList& checks) {
  std::vector<std::vector<runtime::BufferPtr>> outs;
  try {
    outs = exe.ExecuteReplicated(args);
  } catch (const runtime::Error& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), "tpu: out of memory running ", what, ": ", e.what());
    TORCH_CHECK(false, "tpu: running ", what, " failed: ", e.what());
  }
  for (auto& replica : outs) {
    if (replica.empty()) continue;
    if (launch_blocking()) {
      try {
        for (const auto& b : replica) b->BlockUntilReady();
      } catch (const runtime::Error& e) {
        TORCH_CHECK(false, "tpu: ", what, " failed on the device: ", e.what());
      }
    } else {
      track_pending(replica.back());
    }
    if (checks && !checks->empty()) {
      defer_checks(std::move(replica.back()), checks);
      replica.pop_back();
    }
  }
  return outs;
}

}  // namespace tt::backend
