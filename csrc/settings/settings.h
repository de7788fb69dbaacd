// torch_tpu's settings for C++: every TORCH_TPU_* environment variable is
// declared once in torch_tpu/settings.def (shared with torch_tpu/settings.py)
// and read here, typed, by its Id:
//
//   if (settings::Bool(settings::Id::TORCH_TPU_DONATION)) ...
//
// A read of an undeclared name does not compile. Each getter reads the
// environment on every call (callers that read once cache the value); an unset
// or empty variable gives the declared default. A bad value throws
// settings::Error (a std::invalid_argument, which pybind11 turns into
// ValueError) naming the variable and what it accepts, with the same text as
// the Python side. No PyTorch and no PJRT here: every layer may use it.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tt::settings {

enum class Id {
#define TT_SETTING(name, type, default_value, allowed, section, doc) name,
#include "../../torch_tpu/settings.def"  // the one table
#undef TT_SETTING
};

struct Spec {
  const char* name;
  const char* type;           // bool, int, bytes, enum, int_list, path, path_list, string
  const char* default_value;  // "" = unset
  const char* allowed;        // enum / int_list: "a|b"; int: "MIN..MAX" or "MIN.."
  const char* section;        // runtime or build
  const char* doc;
};

class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Every declaration, in the table's order.
const std::vector<Spec>& All();
const Spec& Of(Id id);

// The variable's text when set and non-empty.
std::optional<std::string> Raw(Id id);

// The typed value: the variable when set, else the default; the Optional*
// forms return nullopt for a setting with no default that is unset. Calling a
// getter of another type than the declared one throws std::logic_error.
bool Bool(Id id);
std::optional<bool> OptionalBool(Id id);
int64_t Int(Id id);
std::optional<int64_t> OptionalInt(Id id);
int64_t Bytes(Id id);
std::optional<int64_t> OptionalBytes(Id id);
std::string Enum(Id id);  // lower case; "" when unset without a default
std::string Path(Id id);   // "" when unset without a default
std::vector<std::string> PathList(Id id);
std::string String(Id id);

// What a value of the setting may be, in words ("one of warn, error, silent").
std::string Accepts(const Spec& spec);

}  // namespace tt::settings
