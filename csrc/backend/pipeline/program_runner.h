// The one component that compiles and runs programs, for every mode: strict
// eager (one ATen call), fused eager (a recorded cluster) and torch.compile
// (an FX graph). It owns
//   - compiling: timing, the persistent cache (through the runtime), and the
//     dump of a program XLA rejects (TORCH_TPU_DUMP_FAILED);
//   - running: the RNG inputs, out of memory becoming torch.OutOfMemoryError,
//     TORCH_TPU_LAUNCH_BLOCKING, tracking pending results, and the device
//     checks' flags (raised when the host next waits);
//   - one bounded least-recently-used cache of executables shared by the
//     modes, with counters per mode (torch_tpu.cache_info()).
#pragma once

#include <ATen/core/Generator.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lowering/rule.h"
#include "runtime/runtime.h"

namespace tt::backend {

struct OpMeta;  // op_program.h: what lowering one eager call taught

// A program's device checks (lowering/device_check.h), in the order of its
// last result's (bad, value) pairs.
using CheckList = std::shared_ptr<const std::vector<lowering::CheckInfo>>;

// Collective: a program over several devices at once (an in-process collective).
enum class ProgramMode { Eager = 0, Fused = 1, Graph = 2, Collective = 3 };
constexpr size_t kProgramModes = 4;
const char* program_mode_name(ProgramMode mode);

// A cached program. `exe` is null for an eager call that fused eager only
// records (it is compiled as part of its cluster); `meta` is set for eager
// calls.
struct CachedProgram {
  runtime::ExecutablePtr exe;
  std::shared_ptr<OpMeta> meta;
  CheckList checks;  // fused clusters (an eager call's are in meta)
  // Parameters aliased to a result (their buffers may be donated): an
  // in-place eager call's written storage; a fused cluster's inputs.
  std::vector<int> aliased_params;
  // A functional eager call's donated operands (OpMeta::donations):
  // (parameter, result); the parameter is also in aliased_params.
  std::vector<std::pair<int, int>> donated;
};

struct ModeCounters {
  int64_t hits = 0, misses = 0, compiles = 0, entries = 0, evictions = 0;
  double compile_seconds = 0;
};
using ProgramCacheStats = std::array<ModeCounters, kProgramModes>;

// The program stored under `key`, counted as a hit for `mode`; null (a miss)
// when there is none, or when `need_exe` and it holds no executable.
std::shared_ptr<CachedProgram> find_program(const std::string& key, ProgramMode mode, bool need_exe = true);
// Stores `p` under `key`, evicting the least recently used programs past
// TORCH_TPU_PROGRAM_CACHE_ENTRIES (4096). A program still running or held by
// its caller stays alive through that reference.
void store_program(const std::string& key, ProgramMode mode, std::shared_ptr<CachedProgram> p);
ProgramCacheStats program_cache_stats();
// The entries of the cache one by one, most recently used first
// (torch.tpu._get_cache_stats().per_entry_stats).
struct ProgramCacheEntry {
  std::string key;    // what the program is cached under (op, dtypes, shapes, settings; or a graph's hash)
  ProgramMode mode;
  int64_t reads = 0;  // cache hits on it since it was stored
};

// Most recently used first.
std::vector<ProgramCacheEntry> program_cache_entries();

// Aliased program arguments so far: buffers donated (updated in place), and
// ones XLA had to copy because something else still held them.
struct DonationStats {
  int64_t donated = 0, copied = 0;
};
DonationStats donation_stats();
// Drops the programs of `mode` (every mode's when unset) and resets their counters.
void program_cache_clear(std::optional<ProgramMode> mode = std::nullopt);

// Compiles `text` (or loads it from the persistent cache). A rejected program
// raises a RuntimeError naming `what` and XLA's message, followed by `hint`
// and, with TORCH_TPU_DUMP_FAILED set, the program text. With `overrides`
// null, the current ones (runtime::CurrentCompileOverrides()) apply; the
// caller's cache key must include whichever it compiles with.
runtime::ExecutablePtr compile_program(const std::string& text, ProgramMode mode, const std::string& what,
                                       const std::string& hint = "",
                                       const runtime::CompileOverrides* overrides = nullptr);
// The executable of `text` compiled with one replica per device of `devices`
// (module attribute mhlo.num_replicas = devices.size()), from the one program
// cache (ProgramMode::Collective), compiled on a miss.
runtime::ExecutablePtr replicated_program(const std::string& text, const std::vector<int>& devices,
                                          const std::string& what);

// The two u64 inputs of a random program: the generator's seed and the start
// of `counters` fresh counters (the generator advances past them).
std::pair<runtime::BufferPtr, runtime::BufferPtr> rng_words(const std::optional<at::Generator>& gen, int device,
                                                            int64_t counters);

// A program's arguments: borrowed buffers, and the ones made for this run.
class ProgramArgs {
 public:
  void add(runtime::Buffer* borrowed) { args_.push_back(borrowed); }
  void add(runtime::BufferPtr owned);
  // Argument `index` is a parameter the program aliases to a result: with
  // `donate` its buffer is given to the program (and dead afterwards), else
  // XLA copies it. Only a caller that knows nothing else reads the buffer
  // may donate it.
  // TORCH_TPU_DONATION=0 donates nothing (for comparisons).
  void set_aliased(size_t index, bool donate);
  // rng_words(gen, device, counters).
  void add_rng(const std::optional<at::Generator>& gen, int device, int64_t counters);
  const std::vector<runtime::Buffer*>& list() const { return args_; }
  size_t size() const { return args_.size(); }

 private:
  friend std::vector<runtime::BufferPtr> run_program(const runtime::Executable&, const ProgramArgs&, int,
                                                     const std::string&, const CheckList&);
  std::vector<runtime::BufferPtr> keep_;
  std::vector<runtime::Buffer*> args_;
  std::vector<int64_t> non_donatable_;  // aliased, copied
  std::vector<size_t> donated_;         // aliased, donated
};

// TORCH_TPU_LAUNCH_BLOCKING=1: every program is waited for, so that an error
// surfaces at the call that caused it (and fused eager records nothing).
bool launch_blocking();

// Runs `exe` on `device`. Out of memory raises torch.OutOfMemoryError, any
// other failure a RuntimeError, each naming `what`. The results are tracked
// as pending (torch.tpu.synchronize waits for them), or waited for under
// launch blocking. With `checks`, the last result is their flags: it is not
// returned but kept until the host next waits (verify_device_checks), or
// verified at once under launch blocking.
std::vector<runtime::BufferPtr> run_program(const runtime::Executable& exe, const ProgramArgs& args, int device,
                                            const std::string& what, const CheckList& checks = nullptr);

// Runs a program of runtime::CompileReplicated with one argument list per
// replica (replica r's buffers on its device); returns each replica's
// results. With `checks`, each replica's last result is its check flags,
// kept and raised as run_program's are. Nothing is donated.
std::vector<std::vector<runtime::BufferPtr>> run_replicated_program(
    const runtime::Executable& exe, const std::vector<std::vector<runtime::Buffer*>>& args, const std::string& what,
    const CheckList& checks = nullptr);

// Reads the flags of every program run since the last call and raises the
// first failed check as PyTorch's CPU kernel would (IndexError, RuntimeError
// or ValueError, naming the op and the bad value). Called wherever the host
// waits: a copy to the host, torch.tpu.synchronize. Results already computed
// stay as they are, and the process stays usable.
void verify_device_checks();

}  // namespace tt::backend
