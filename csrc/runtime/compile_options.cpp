#include "runtime/compile_options.h"

#include <atomic>
#include <cstdint>

#include "runtime/error.h"

namespace tt::runtime {
namespace {

std::atomic<bool> g_allow_excess_precision{true};
std::atomic<int> g_optimization_level{-1};

void Varint(std::string& s, uint64_t v) {
  while (v >= 0x80) { s.push_back(static_cast<char>((v & 0x7f) | 0x80)); v >>= 7; }
  s.push_back(static_cast<char>(v));
}
void Tag(std::string& s, int field, int wire) { Varint(s, (static_cast<uint64_t>(field) << 3) | wire); }
void Bytes(std::string& s, int field, const std::string& b) { Tag(s, field, 2); Varint(s, b.size()); s += b; }

// One map entry of CompileOptionsProto.env_option_overrides (field 7):
// key (1) = name, value (2) = OptionOverrideProto.
// OptionOverrideProto: bool_field (2), int_field (3).
std::string Override(const std::string& name, int field, int64_t value) {
  std::string option;
  Tag(option, field, 0); Varint(option, static_cast<uint64_t>(value));
  std::string entry;
  Bytes(entry, 1, name);
  Bytes(entry, 2, option);
  std::string out;
  Bytes(out, 7, entry);
  return out;
}

}  // namespace

std::string CompileOverrides::serialized() const {
  std::string out;
  if (!allow_excess_precision) out += Override("xla_allow_excess_precision", 2, 0);
  if (optimization_level >= 0) out += Override("xla_backend_optimization_level", 3, optimization_level);
  return out;
}

CompileOverrides CurrentCompileOverrides() {
  CompileOverrides o;
  o.allow_excess_precision = g_allow_excess_precision.load();
  o.optimization_level = g_optimization_level.load();
  return o;
}

void SetAllowExcessPrecision(bool allow) { g_allow_excess_precision = allow; }

void SetOptimizationLevel(int level) {
  if (level < -1 || level > 3)
    throw Error(3, "XLA optimization level " + std::to_string(level) + " is not 0..3 (or -1, the plugin's default)");
  g_optimization_level = level;
}

}  // namespace tt::runtime
