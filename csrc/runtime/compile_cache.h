// The persistent compile cache: serialized executables in a folder, one file
// per program, shared by every process of the user. Knows nothing of PJRT:
// it stores and returns opaque bytes under a 32-byte key.
//
// Folder: TORCH_TPU_CACHE_DIR, else $XDG_CACHE_HOME/torch_tpu, else
// ~/.cache/torch_tpu. TORCH_TPU_CACHE=0 turns it off. TORCH_TPU_CACHE_MAX_BYTES
// caps the bytes of its entries (default 1 GiB; K/M/G suffixes allowed); past
// the cap, the least recently used entries are deleted.
//
// Safety: an entry is "<hex key>.tpuexe" holding a header (magic, format
// version, the full key, payload size, payload SHA-256) and the payload. A
// file whose header or checksum does not match is never returned; the
// caller's next Put replaces it. Puts write a private temporary file and
// rename it into place, so readers in other processes see either the old
// entry or the whole new one. Only *.tpuexe files (and our own stale
// temporaries) are ever deleted, so pointing the cache at a folder with other
// files in it is harmless.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "runtime/sha256.h"

namespace tt::runtime {

struct CompileCacheConfig {
  bool enabled = false;
  std::string dir;
  int64_t max_bytes = 0;
  std::string source;  // which variable chose the folder (or why it is off)

  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;
  // Reads the settings (csrc/settings); throws Error(3) for a malformed
  // TORCH_TPU_CACHE or TORCH_TPU_CACHE_MAX_BYTES.
  static CompileCacheConfig FromEnv();
};

struct CompileCacheStats {
  int64_t hits = 0;       // entries returned and used
  int64_t misses = 0;     // lookups that found no usable entry
  int64_t rejected = 0;   // entries found but corrupt, truncated or mismatched (also misses)
  int64_t writes = 0;     // entries stored
  int64_t write_errors = 0;
  int64_t evictions = 0;  // entries deleted to respect the cap
  int64_t bytes_read = 0, bytes_written = 0;
  double load_seconds = 0;   // reading and verifying entries, and the caller's loading of them
  double store_seconds = 0;  // producing, writing and evicting entries
};

class CompileCache {
 public:
  enum class Lookup { Found, Absent, Rejected };

  explicit CompileCache(CompileCacheConfig config);
  bool enabled() const { return config_.enabled; }
  const CompileCacheConfig& config() const { return config_; }

  // Reads the entry for `key` into `payload`. Absent and Rejected count as
  // misses; Found counts nothing until the caller reports how it went
  // (RecordHit, or RecordUnusable when the payload could not be loaded).
  Lookup Get(const Digest& key, std::string* payload);
  // `seconds`: how long the caller took to load the payload.
  void RecordHit(double seconds = 0);
  void RecordUnusable(double seconds = 0);
  // Stores `payload` under `key` (atomically replacing any old entry), then
  // evicts least recently used entries past the cap. Never throws: a failed
  // write is counted and logged under TORCH_TPU_LOG. `seconds`: how long the
  // caller took to produce the payload (counted in store_seconds).
  void Put(const Digest& key, const std::string& payload, double seconds = 0);

  // Scans the folder: the bytes and number of entries now on disk.
  void Usage(int64_t* bytes, int64_t* entries) const;
  CompileCacheStats stats() const;
  std::string EntryPath(const Digest& key) const;

  static constexpr size_t kHeaderSize = 88;

 private:
  void EvictIfNeeded(const std::string& keep);
  CompileCacheConfig config_;
  mutable std::mutex mu_;  // guards stats_ and known_bytes_
  CompileCacheStats stats_;
  int64_t known_bytes_ = -1;  // this process's estimate of the folder's size; -1: not scanned
  std::atomic<uint64_t> tmp_counter_{0};
};

}  // namespace tt::runtime
