// Tests of the persistent compile cache: SHA-256, configuration from the
// environment, the entry format (corrupt, truncated and mismatched entries are
// never returned), eviction, concurrent writers, and Runtime::Compile loading
// from disk. A plain main(): prints "N passed, M failed".
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/compile_cache.h"
#include "runtime/runtime.h"
#include "settings/settings.h"
#include "runtime/sha256.h"
#include "test_support.h"

using namespace tt::runtime;


static std::string MakeTempDir() {
  char tmpl[] = "/tmp/tt_cache_test_XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? d : "";
}

static void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      std::string p = dir + "/" + n;
      struct stat st;
      if (lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) RemoveTree(p);
      else unlink(p.c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

static std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

static std::string ReadFile(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static void WriteFile(const std::string& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
}

static Digest KeyOf(const std::string& s) { return Sha256::Of(s); }

static CompileCache MakeCache(const std::string& dir, int64_t max_bytes) {
  CompileCacheConfig c;
  c.enabled = true;
  c.dir = dir;
  c.max_bytes = max_bytes;
  c.source = "test";
  return CompileCache(c);
}

static void TestSha256() {
  CHECK(ToHex(Sha256::Of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(ToHex(Sha256::Of("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(ToHex(Sha256::Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(ToHex(Sha256::Of(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Incremental updates in odd-sized pieces give the same digest.
  Sha256 h;
  for (size_t pos = 0; pos < million.size();) {
    size_t n = std::min<size_t>(million.size() - pos, 1 + pos % 97);
    h.Update(million.data() + pos, n);
    pos += n;
  }
  CHECK(h.Final() == Sha256::Of(million));
}

static void TestConfig() {
  const char* vars[] = {"TORCH_TPU_CACHE", "TORCH_TPU_CACHE_DIR", "TORCH_TPU_CACHE_MAX_BYTES", "XDG_CACHE_HOME",
                        "HOME"};
  std::vector<std::pair<std::string, bool>> saved;
  for (const char* v : vars) saved.emplace_back(getenv(v) ? getenv(v) : "", getenv(v) != nullptr);
  for (const char* v : vars) unsetenv(v);

  setenv("HOME", "/home/someone", 1);
  CompileCacheConfig c = CompileCacheConfig::FromEnv();
  CHECK(c.enabled && c.dir == "/home/someone/.cache/torch_tpu");
  CHECK(c.max_bytes == CompileCacheConfig::kDefaultMaxBytes);
  setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  CHECK(CompileCacheConfig::FromEnv().dir == "/xdg/cache/torch_tpu");
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);  // the XDG spec: relative paths are invalid
  CHECK(CompileCacheConfig::FromEnv().dir == "/home/someone/.cache/torch_tpu");
  setenv("TORCH_TPU_CACHE_DIR", "/explicit/dir/", 1);
  CHECK(CompileCacheConfig::FromEnv().dir == "/explicit/dir");
  setenv("TORCH_TPU_CACHE_MAX_BYTES", "512M", 1);
  CHECK(CompileCacheConfig::FromEnv().max_bytes == int64_t{512} << 20);
  setenv("TORCH_TPU_CACHE_MAX_BYTES", "2GiB", 1);
  CHECK(CompileCacheConfig::FromEnv().max_bytes == int64_t{2} << 30);
  setenv("TORCH_TPU_CACHE_MAX_BYTES", "12345", 1);
  CHECK(CompileCacheConfig::FromEnv().max_bytes == 12345);
  for (const char* bad : {"-5", "lots", "12Q", "99999999999999999999", "1.5G"}) {
    setenv("TORCH_TPU_CACHE_MAX_BYTES", bad, 1);
    int code = 0;
    std::string what;
    try {
      CompileCacheConfig::FromEnv();
    } catch (const Error& e) {
      code = e.code();
      what = e.what();
    }
    CHECK(code == 3 && what.find(bad) != std::string::npos);
  }
  unsetenv("TORCH_TPU_CACHE_MAX_BYTES");
  setenv("TORCH_TPU_CACHE", "0", 1);
  CHECK(!CompileCacheConfig::FromEnv().enabled);
  setenv("TORCH_TPU_CACHE", "off", 1);
  CHECK(!CompileCacheConfig::FromEnv().enabled);
  setenv("TORCH_TPU_CACHE", "1", 1);
  CHECK(CompileCacheConfig::FromEnv().enabled);
  setenv("TORCH_TPU_CACHE", "maybe", 1);
  bool threw = false;
  try {
    CompileCacheConfig::FromEnv();
  } catch (const Error& e) {
    threw = e.code() == 3;
  }
  CHECK(threw);

  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].second) setenv(vars[i], saved[i].first.c_str(), 1);
    else unsetenv(vars[i]);
  }

  // A folder that cannot be created turns the cache off (with a warning), it
  // does not fail.
  CompileCacheConfig bad;
  bad.enabled = true;
  bad.dir = "/proc/self/no_such_folder/torch_tpu";
  bad.max_bytes = 1 << 20;
  CompileCache off(bad);
  CHECK(!off.enabled());
  std::string p;
  CHECK(off.Get(KeyOf("x"), &p) == CompileCache::Lookup::Absent);
}

static void TestEntries(const std::string& root) {
  const std::string dir = root + "/entries/nested";  // created on demand
  CompileCache cache = MakeCache(dir, 1 << 20);
  CHECK(cache.enabled());
  const Digest k1 = KeyOf("program one"), k2 = KeyOf("program two");
  std::string payload(10000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 + 3);

  std::string got = "stale";
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Absent);
  CHECK(got.empty());
  cache.Put(k1, payload);
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Found && got == payload);
  cache.RecordHit();
  const std::string p1 = cache.EntryPath(k1);
  CHECK(ReadFile(p1).size() == payload.size() + CompileCache::kHeaderSize);
  // Nothing but the entry is left in the folder (the temporary was renamed).
  CHECK(Files(dir).size() == 1);

  const std::string good = ReadFile(p1);
  // A flipped payload byte fails the checksum.
  std::string bad = good;
  bad[CompileCache::kHeaderSize + 1234] ^= 0x20;
  WriteFile(p1, bad);
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Rejected && got.empty());
  // Truncated: shorter than its header says, and shorter than a header.
  WriteFile(p1, good.substr(0, good.size() - 1));
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Rejected);
  WriteFile(p1, good.substr(0, 40));
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Rejected);
  WriteFile(p1, "");
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Rejected);
  // A valid entry of another key under this key's name (a mismatch).
  cache.Put(k2, payload);
  WriteFile(p1, ReadFile(cache.EntryPath(k2)));
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Rejected);
  // A wrong format version.
  bad = good;
  bad[8] = 99;
  WriteFile(p1, bad);
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Rejected);
  // The next Put replaces the bad entry.
  cache.Put(k1, payload);
  CHECK(cache.Get(k1, &got) == CompileCache::Lookup::Found && got == payload);
  cache.RecordHit();
  // An empty payload is a valid entry too.
  const Digest k3 = KeyOf("empty");
  cache.Put(k3, "");
  CHECK(cache.Get(k3, &got) == CompileCache::Lookup::Found && got.empty());
  cache.RecordHit();

  CompileCacheStats s = cache.stats();
  std::printf("entries: hits %lld misses %lld rejected %lld writes %lld\n", (long long)s.hits, (long long)s.misses,
              (long long)s.rejected, (long long)s.writes);
  CHECK(s.hits == 3 && s.rejected == 6 && s.misses == 7 && s.writes == 4 && s.write_errors == 0);
  int64_t bytes = 0, entries = 0;
  cache.Usage(&bytes, &entries);
  CHECK(entries == 3);
  CHECK(bytes == static_cast<int64_t>(2 * (payload.size() + CompileCache::kHeaderSize) + CompileCache::kHeaderSize));
}

static void TestEviction(const std::string& root) {
  const std::string dir = root + "/evict";
  const size_t payload_size = 1000, entry = payload_size + CompileCache::kHeaderSize;
  const int64_t cap = static_cast<int64_t>(4 * entry + entry / 2);  // room for four entries
  CompileCache cache = MakeCache(dir, cap);
  // Files that are not ours are never touched, nor counted.
  WriteFile(dir + "/notes.txt", std::string(5000, 'n'));
  // A temporary left by a dead process: removed once it is an hour old.
  const std::string stale = dir + "/.tmp-0123456789abcdef-1-0";
  WriteFile(stale, "half-written");
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  utimensat(AT_FDCWD, stale.c_str(), old, 0);

  std::vector<Digest> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(KeyOf("evict " + std::to_string(i)));
    cache.Put(keys.back(), std::string(payload_size, static_cast<char>('a' + i)));
    // Distinct modification times, oldest first.
    struct timespec t[2] = {{1700000000 + i * 10, 0}, {1700000000 + i * 10, 0}};
    utimensat(AT_FDCWD, cache.EntryPath(keys.back()).c_str(), t, 0);
  }
  CHECK(cache.stats().evictions == 0);
  // Using entry 0 makes it the most recently used.
  std::string got;
  CHECK(cache.Get(keys[0], &got) == CompileCache::Lookup::Found);
  // Two more entries: each goes over the cap, so each evicts the least
  // recently used entry (1, then 2).
  for (int i = 4; i < 6; ++i) {
    keys.push_back(KeyOf("evict " + std::to_string(i)));
    cache.Put(keys.back(), std::string(payload_size, static_cast<char>('a' + i)));
  }
  int64_t bytes = 0, entries = 0;
  cache.Usage(&bytes, &entries);
  std::printf("eviction: %lld bytes in %lld entries (cap %lld), %lld evicted\n", (long long)bytes,
              (long long)entries, (long long)cap, (long long)cache.stats().evictions);
  CHECK(bytes <= cap);
  CHECK(cache.stats().evictions >= 2);
  CHECK(cache.Get(keys[0], &got) == CompileCache::Lookup::Found);  // recently used: kept
  CHECK(cache.Get(keys[1], &got) == CompileCache::Lookup::Absent);  // oldest: evicted
  CHECK(cache.Get(keys[5], &got) == CompileCache::Lookup::Found);  // newest: kept
  CHECK(ReadFile(dir + "/notes.txt").size() == 5000);
  struct stat st;
  CHECK(stat(stale.c_str(), &st) != 0);
  // An entry larger than the whole cap is not stored.
  cache.Put(KeyOf("huge"), std::string(static_cast<size_t>(cap), 'h'));
  CHECK(cache.Get(KeyOf("huge"), &got) == CompileCache::Lookup::Absent);
}

// Several processes and threads store and read the same keys at once: every
// read sees a whole, valid entry or none.
static void TestConcurrency(const std::string& root) {
  const std::string dir = root + "/concurrent";
  const int kProcs = 4, kThreads = 3, kRounds = 40, kKeys = 5;
  auto payload_for = [](int key, int writer) {
    std::string p(20000 + 977 * key, static_cast<char>('A' + key));
    p[0] = static_cast<char>(writer);  // writers differ, every version is valid
    return p;
  };
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      int bad = 0;
      std::vector<std::thread> ts;
      for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&, t] {
          CompileCache cache = MakeCache(dir, 1 << 30);
          for (int r = 0; r < kRounds; ++r) {
            int k = (r + t + p) % kKeys;
            Digest key = KeyOf("shared " + std::to_string(k));
            std::string got;
            auto res = cache.Get(key, &got);
            if (res == CompileCache::Lookup::Rejected) ++bad;
            if (res == CompileCache::Lookup::Found && got.substr(1) != payload_for(k, 0).substr(1)) ++bad;
            cache.Put(key, payload_for(k, p * kThreads + t));
          }
        });
      for (auto& th : ts) th.join();
      _exit(bad ? 1 : 0);
    }
    kids.push_back(pid);
  }
  bool all_ok = true;
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  CHECK(all_ok);
  CompileCache cache = MakeCache(dir, 1 << 30);
  for (int k = 0; k < kKeys; ++k) {
    std::string got;
    CHECK(cache.Get(KeyOf("shared " + std::to_string(k)), &got) == CompileCache::Lookup::Found);
  }
  CHECK(Files(dir).size() == static_cast<size_t>(kKeys));  // no temporaries left behind
}


static bool RunAdd(Runtime& rt, const ExecutablePtr& exe) {
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  BufferPtr ba = rt.FromHost(a, ElementType::F32, {4}, 0);
  BufferPtr bb = rt.FromHost(b, ElementType::F32, {4}, 0);
  auto outs = exe->Execute({ba.get(), bb.get()}, 0);
  float sum[4] = {0};
  outs.at(0)->ToHost(sum, sizeof(sum));
  return sum[0] == 11 && sum[1] == 22 && sum[2] == 33 && sum[3] == 44;
}

static std::string OnlyEntry(const std::string& dir) {
  for (const auto& f : Files(dir))
    if (f.size() > 7 && f.compare(f.size() - 7, 7, ".tpuexe") == 0) return dir + "/" + f;
  return "";
}

static void TestRuntime(const std::string& root) {
  const std::string dir = root + "/runtime";
  setenv("TORCH_TPU_CACHE_DIR", dir.c_str(), 1);
  unsetenv("TORCH_TPU_CACHE");
  unsetenv("TORCH_TPU_CACHE_MAX_BYTES");
  Runtime& rt = Runtime::Get();
  CompileCache& cache = rt.compile_cache();
  CHECK(cache.enabled() && cache.config().dir == dir);
  std::printf("plugin %s: can serialize executables: %s\n", rt.info().path.c_str(), rt.can_serialize() ? "yes" : "no");
  if (rt.info().platform == "cpu") CHECK(rt.can_serialize());  // the pinned CPU plugin can
  if (!rt.can_serialize()) return;

  ExecutablePtr cold = rt.Compile(kAdd);
  CHECK(!cold->from_disk());
  CHECK(RunAdd(rt, cold));
  CompileCacheStats s = cache.stats();
  CHECK(s.misses == 1 && s.writes == 1 && s.hits == 0);
  const std::string entry = OnlyEntry(dir);
  CHECK(!entry.empty());

  ExecutablePtr warm = rt.Compile(kAdd);
  CHECK(warm->from_disk());
  CHECK(warm->num_outputs() == 1);
  CHECK(RunAdd(rt, warm));
  CHECK(cache.stats().hits == 1);
  // The same program on the second device, from the same entry (portable).
  if (rt.device_count() > 1) {
    const float a[4] = {1, 2, 3, 4};
    BufferPtr x = rt.FromHost(a, ElementType::F32, {4}, 1);
    auto o = warm->Execute({x.get(), x.get()}, 1);
    float r[4];
    o.at(0)->ToHost(r, sizeof(r));
    CHECK(r[0] == 2 && r[3] == 8);
  }

  // A corrupted entry is not loaded: the program compiles and the entry is replaced.
  std::string bytes = ReadFile(entry);
  std::string corrupt = bytes;
  corrupt[corrupt.size() / 2] ^= 0x55;
  WriteFile(entry, corrupt);
  ExecutablePtr again = rt.Compile(kAdd);
  CHECK(!again->from_disk());
  CHECK(RunAdd(rt, again));
  CHECK(cache.stats().rejected == 1);
  CHECK(rt.Compile(kAdd)->from_disk());

  // An entry with a valid header and checksum whose payload the plugin
  // refuses: counted as rejected, compiled, replaced.
  std::string hex = entry.substr(entry.rfind('/') + 1, 64);
  Digest key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  CompileCache writer = MakeCache(dir, 1 << 30);
  writer.Put(key, "this is not an executable");
  const int64_t rejected = cache.stats().rejected;
  ExecutablePtr refused = rt.Compile(kAdd);
  CHECK(!refused->from_disk());
  CHECK(RunAdd(rt, refused));
  CHECK(cache.stats().rejected == rejected + 1);
  CHECK(rt.Compile(kAdd)->from_disk());

  // A different program is a different entry.
  std::string other(kAdd);
  other.replace(other.find("stablehlo.add"), 13, "stablehlo.multiply");
  ExecutablePtr mul = rt.Compile(other);
  CHECK(!mul->from_disk());
  int n = 0;
  for (const auto& f : Files(dir)) n += f.size() > 7 && f.compare(f.size() - 7, 7, ".tpuexe") == 0;
  CHECK(n == 2);
  int64_t used = 0, count = 0;
  cache.Usage(&used, &count);
  CHECK(count == 2 && used > 0);
  std::printf("runtime: entry of the add program: %zu bytes\n", bytes.size());
}

int main() {
  if (!tt::settings::Raw(tt::settings::Id::TORCH_TPU_PLUGIN_SEARCH_PATH) && std::strlen(TT_TEST_SITE_PACKAGES) > 0)
    setenv("TORCH_TPU_PLUGIN_SEARCH_PATH", TT_TEST_SITE_PACKAGES, 0);
  setenv("TORCH_TPU_NUM_DEVICES", "2", 0);
  const std::string root = MakeTempDir();
  CHECK(!root.empty());
  try {
    TestSha256();
    TestConfig();
    TestEntries(root);
    TestEviction(root);
    TestConcurrency(root);
    TestRuntime(root);
  } catch (const std::exception& e) {
    ++g_fail;
    std::fprintf(stderr, "FAIL: unexpected exception: %s\n", e.what());
  }
  RemoveTree(root);
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
