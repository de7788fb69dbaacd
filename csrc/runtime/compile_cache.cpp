// The persistent compile cache's folder: configuration, entry format,
// atomic stores and least-recently-used eviction (see compile_cache.h).
#include "runtime/compile_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "runtime/error.h"
#include "settings/settings.h"

namespace tt::runtime {
namespace detail {
bool LogEnabled();  // plugin_loader.cpp
}  // namespace detail

namespace {

// Entry layout (native byte order; a foreign-endian file fails the magic or
// size checks and is replaced):
//   0  char[8]  magic "TTPUEXE\n"
//   8  u32      format version (kFormat)
//  12  u32      header size (88)
//  16  u8[32]   key
//  48  u64      payload size
//  56  u8[32]   SHA-256 of the payload
//  88  payload
constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'E', 'X', 'E', '\n'};
constexpr uint32_t kFormat = 1;
constexpr const char* kSuffix = ".tpuexe";
constexpr const char* kTmpPrefix = ".tmp-";
// A temporary older than this was left by a process that died mid-store.
constexpr int64_t kStaleTmpSeconds = 3600;

std::string Env(const char* n) {
  const char* v = std::getenv(n);
  return v ? v : "";
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// mkdir -p with mode 0700 for the folders it creates; "" on success, else why.
std::string MakeDirs(const std::string& dir) {
  std::string path;
  size_t pos = 0;
  while (pos <= dir.size()) {
    size_t next = dir.find('/', pos);
    if (next == std::string::npos) next = dir.size();
    path = dir.substr(0, next);
    pos = next + 1;
    if (path.empty()) continue;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return path + ": " + std::strerror(errno);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return dir + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0) return dir + ": " + std::strerror(errno);
  return "";
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct FileInfo {
  std::string path;
  int64_t size;
  int64_t mtime_ns;
};

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The folder's entries; removes stale temporaries when `clean` is set.
std::vector<FileInfo> ListEntries(const std::string& dir, bool clean) {
  std::vector<FileInfo> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    bool entry = EndsWith(name, kSuffix) && name[0] != '.';
    bool tmp = name.compare(0, std::strlen(kTmpPrefix), kTmpPrefix) == 0;
    if (!entry && !tmp) continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (tmp) {
      if (clean && now_s - static_cast<int64_t>(st.st_mtim.tv_sec) > kStaleTmpSeconds) ::unlink(path.c_str());
      continue;
    }
    out.push_back({path, static_cast<int64_t>(st.st_size), MtimeNs(st)});
  }
  ::closedir(d);
  return out;
}

}  // namespace

CompileCacheConfig CompileCacheConfig::FromEnv() {
  using settings::Id;
  CompileCacheConfig c;
  try {
    if (!settings::Bool(Id::TORCH_TPU_CACHE)) {
      c.source = "TORCH_TPU_CACHE=" + settings::Raw(Id::TORCH_TPU_CACHE).value_or("");
      return c;
    }
    c.max_bytes = settings::Bytes(Id::TORCH_TPU_CACHE_MAX_BYTES);
    c.dir = settings::Path(Id::TORCH_TPU_CACHE_DIR);
  } catch (const settings::Error& e) {
    throw Error(3, e.what());
  }
  if (!c.dir.empty()) {
    c.source = "TORCH_TPU_CACHE_DIR";
  } else if (!Env("XDG_CACHE_HOME").empty() && Env("XDG_CACHE_HOME")[0] == '/') {
    c.dir = Env("XDG_CACHE_HOME") + "/torch_tpu";
    c.source = "XDG_CACHE_HOME";
  } else {
    std::string home = Env("HOME");
    if (home.empty())
      if (const passwd* pw = ::getpwuid(::getuid())) home = pw->pw_dir ? pw->pw_dir : "";
    if (home.empty()) {
      c.source = "no home folder (set TORCH_TPU_CACHE_DIR)";
      return c;
    }
    c.dir = home + "/.cache/torch_tpu";
    c.source = "home folder";
  }
  while (c.dir.size() > 1 && c.dir.back() == '/') c.dir.pop_back();
  c.enabled = true;
  return c;
}

CompileCache::CompileCache(CompileCacheConfig config) : config_(std::move(config)) {
  if (!config_.enabled) return;
  std::string why = MakeDirs(config_.dir);
  if (!why.empty()) {
    // Not fatal: programs still compile, only nothing persists.
    std::fprintf(stderr,
                 "[torch_tpu] warning: persistent compile cache off: cannot use %s (set "
                 "TORCH_TPU_CACHE_DIR to a writable folder, or TORCH_TPU_CACHE=0)\n",
                 why.c_str());
    config_.enabled = false;
    config_.source = "cannot use " + why;
  }
}

std::string CompileCache::EntryPath(const Digest& key) const { return config_.dir + "/" + ToHex(key) + kSuffix; }

CompileCache::Lookup CompileCache::Get(const Digest& key, std::string* payload) {
  if (!enabled()) return Lookup::Absent;
  auto t0 = std::chrono::steady_clock::now();
  const std::string path = EntryPath(key);
  Lookup result = Lookup::Rejected;
  int64_t read_bytes = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    result = Lookup::Absent;
  } else {
    struct stat st;
    uint8_t h[kHeaderSize];
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(kHeaderSize) &&
        ReadAll(fd, h, kHeaderSize)) {
      uint32_t format, header_size;
      uint64_t size;
      std::memcpy(&format, h + 8, 4);
      std::memcpy(&header_size, h + 12, 4);
      std::memcpy(&size, h + 48, 8);
      bool header_ok = std::memcmp(h, kMagic, 8) == 0 && format == kFormat && header_size == kHeaderSize &&
                       std::memcmp(h + 16, key.data(), key.size()) == 0 &&
                       size == static_cast<uint64_t>(st.st_size) - kHeaderSize;
      if (header_ok) {
        payload->resize(size);
        if (ReadAll(fd, &(*payload)[0], size) && std::memcmp(Sha256::Of(*payload).data(), h + 56, 32) == 0) {
          result = Lookup::Found;
          read_bytes = static_cast<int64_t>(st.st_size);
          ::futimens(fd, nullptr);  // mark as recently used, for eviction
        }
      }
    }
    ::close(fd);
  }
  if (result != Lookup::Found) payload->clear();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.load_seconds += secs;
  stats_.bytes_read += read_bytes;
  if (result != Lookup::Found) stats_.misses += 1;
  if (result == Lookup::Rejected) {
    stats_.rejected += 1;
    if (detail::LogEnabled())
      std::fprintf(stderr, "[torch_tpu] compile cache: ignoring invalid entry %s\n", path.c_str());
  }
  return result;
}

void CompileCache::RecordHit(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.hits += 1;
  stats_.load_seconds += seconds;
}

void CompileCache::RecordUnusable(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.load_seconds += seconds;
  stats_.misses += 1;
  stats_.rejected += 1;
}

void CompileCache::Put(const Digest& key, const std::string& payload, double seconds) {
  if (!enabled()) return;
  auto t0 = std::chrono::steady_clock::now();
  struct Timer {  // adds this call's time to store_seconds on every return path
    CompileCache* c;
    std::chrono::steady_clock::time_point t0;
    double extra;
    ~Timer() {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() + extra;
      std::lock_guard<std::mutex> lock(c->mu_);
      c->stats_.store_seconds += s;
    }
  } timer{this, t0, seconds};
  const int64_t total = static_cast<int64_t>(kHeaderSize + payload.size());
  if (total > config_.max_bytes) return;  // could never fit under the cap
  const std::string path = EntryPath(key);
  const std::string tmp = config_.dir + "/" + kTmpPrefix + ToHex(key).substr(0, 16) + "-" +
                          std::to_string(::getpid()) + "-" + std::to_string(tmp_counter_.fetch_add(1));
  uint8_t h[kHeaderSize] = {0};
  std::memcpy(h, kMagic, 8);
  const uint32_t format = kFormat, header_size = kHeaderSize;
  const uint64_t size = payload.size();
  std::memcpy(h + 8, &format, 4);
  std::memcpy(h + 12, &header_size, 4);
  std::memcpy(h + 16, key.data(), key.size());
  std::memcpy(h + 48, &size, 8);
  Digest sum = Sha256::Of(payload);
  std::memcpy(h + 56, sum.data(), sum.size());

  bool ok = false;
  int64_t replaced = 0;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ok = WriteAll(fd, h, kHeaderSize) && WriteAll(fd, payload.data(), payload.size());
    ok = (::close(fd) == 0) && ok;
    // No fsync: an entry torn by a crash fails its checksum and is replaced.
    struct stat old;
    if (ok && ::stat(path.c_str(), &old) == 0) replaced = static_cast<int64_t>(old.st_size);
    ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) ::unlink(tmp.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) {
      stats_.writes += 1;
      stats_.bytes_written += total;
      if (known_bytes_ >= 0) known_bytes_ += total - replaced;
    } else {
      stats_.write_errors += 1;
    }
  }
  if (!ok) {
    if (detail::LogEnabled())
      std::fprintf(stderr, "[torch_tpu] compile cache: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return;
  }
  EvictIfNeeded(path);
}

void CompileCache::EvictIfNeeded(const std::string& keep) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (known_bytes_ >= 0 && known_bytes_ <= config_.max_bytes) return;
  }
  // Rescan: other processes add and evict entries too.
  std::vector<FileInfo> files = ListEntries(config_.dir, /*clean=*/true);
  int64_t total = 0;
  for (const auto& f : files) total += f.size;
  int64_t evicted = 0;
  if (total > config_.max_bytes) {
    // Down to 90% of the cap, so that the next few stores do not rescan.
    const int64_t target = config_.max_bytes / 10 * 9;
    std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) { return a.mtime_ns < b.mtime_ns; });
    for (const auto& f : files) {
      if (total <= target) break;
      if (f.path == keep) continue;
      if (::unlink(f.path.c_str()) == 0 || errno == ENOENT) {
        total -= f.size;
        evicted += 1;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  known_bytes_ = total;
  stats_.evictions += evicted;
}

void CompileCache::Usage(int64_t* bytes, int64_t* entries) const {
  *bytes = 0;
  *entries = 0;
  if (!enabled()) return;
  for (const auto& f : ListEntries(config_.dir, /*clean=*/false)) {
    *bytes += f.size;
    *entries += 1;
  }
}

CompileCacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tt::runtime
