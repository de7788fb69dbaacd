#include "runtime/program_dump.h"

#include "settings/settings.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tt::runtime {
namespace {

void Varint(std::string& s, uint64_t v) {
  while (v >= 0x80) { s.push_back(static_cast<char>((v & 0x7f) | 0x80)); v >>= 7; }
  s.push_back(static_cast<char>(v));
}
void Bytes(std::string& s, int field, const std::string& b) {
  Varint(s, (static_cast<uint64_t>(field) << 3) | 2);
  Varint(s, b.size());
  s += b;
}

bool MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

const std::string& DumpDir() {
  static const std::string dir = [] {
    return settings::Path(settings::Id::TORCH_TPU_DUMP_DIR);
  }();
  return dir;
}

std::string DumpProgram(const std::string& name, const std::string& mlir_text) {
  const std::string& dir = DumpDir();
  static std::atomic<bool> warned{false};
  std::string path = dir + "/" + name + ".stablehlo.mlir";
  bool ok = MakeDirs(dir);
  if (ok) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ok = f && std::fwrite(mlir_text.data(), 1, mlir_text.size(), f) == mlir_text.size();
    if (f) ok = (std::fclose(f) == 0) && ok;
  }
  if (!ok && !warned.exchange(true))
    std::fprintf(stderr, "[torch_tpu] TORCH_TPU_DUMP_DIR: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
  // env_option_overrides (7) { key (1) = "xla_dump_to", value (2) = { string_field (1) } }
  std::string option, entry, out;
  Bytes(option, 1, dir + "/" + name);
  Bytes(entry, 1, "xla_dump_to");
  Bytes(entry, 2, option);
  Bytes(out, 7, entry);
  return out;
}

}  // namespace tt::runtime
