#include "runtime/compile_options.h"

#include <atomic>
#include <cstdint>

namespace tt::runtime {
namespace {

std::atomic<bool> g_allow_excess_precision{true};

void Varint(std::string& s, uint64_t v) {
  while (v >= 0x80) { s.push_back(static_cast<char>((v & 0x7f) | 0x80)); v >>= 7; }
  s.push_back(static_cast<char>(v));
}
void Tag(std::string& s, int field, int wire) { Varint(s, (static_cast<uint64_t>(field) << 3) | wire); }
void Bytes(std::string& s, int field, const std::string& b) { Tag(s, field, 2); Varint(s, b.size()); s += b; }

// One map entry of CompileOptionsProto.env_option_overrides (field 7):
// key (1) = name, value (2) = OptionOverrideProto { bool_field (2) }.
std::string BoolOverride(const std::string& name, bool value) {
  std::string option;
  Tag(option, 2, 0); Varint(option, value ? 1 : 0);
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
  if (!allow_excess_precision) out += BoolOverride("xla_allow_excess_precision", false);
  return out;
}

CompileOverrides CurrentCompileOverrides() {
  CompileOverrides o;
  o.allow_excess_precision = g_allow_excess_precision.load();
  return o;
}

void SetAllowExcessPrecision(bool allow) { g_allow_excess_precision = allow; }

}  // namespace tt::runtime
