#include "settings/settings.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace tt::settings {
namespace {

const std::vector<Spec> kSpecs = {
#define TT_SETTING(name, type, default_value, allowed, section, doc) {#name, #type, default_value, allowed, #section, doc},
#include "../../torch_tpu/settings.def"
#undef TT_SETTING
};

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// "MIN..MAX" / "MIN.." / "".
void Bounds(const Spec& s, std::optional<int64_t>* lo, std::optional<int64_t>* hi) {
  std::string a = s.allowed;
  size_t dots = a.find("..");
  if (dots == std::string::npos) return;
  if (dots > 0) *lo = std::strtoll(a.substr(0, dots).c_str(), nullptr, 10);
  if (dots + 2 < a.size()) *hi = std::strtoll(a.substr(dots + 2).c_str(), nullptr, 10);
}

// The parsers, one per type, as in torch_tpu/settings.py; false when malformed.
bool ParseBool(const std::string& text, bool* out) {
  std::string v = Lower(text);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, true;
  return false;
}

bool ParseInt(const std::string& text, const Spec& s, int64_t* out) {
  std::string digits = text;
  bool neg = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    neg = digits[0] == '-';
    digits.erase(0, 1);
  }
  if (!AllDigits(digits)) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long u = std::strtoull(digits.c_str(), &end, 10);
  if (errno || *end || u > static_cast<unsigned long long>(INT64_MAX)) return false;
  int64_t v = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
  std::optional<int64_t> lo, hi;
  Bounds(s, &lo, &hi);
  if ((lo && v < *lo) || (hi && v > *hi)) return false;
  *out = v;
  return true;
}

// "123", "64K", "512M", "2G", "1T" (binary multiples; "512MiB" and "512MB" too).
bool ParseBytes(const std::string& text, int64_t* out) {
  std::string s = Lower(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  auto ends_with = [&](const char* t) {
    size_t n = std::strlen(t);
    return s.size() >= n && s.compare(s.size() - n, n, t) == 0;
  };
  if (ends_with("ib")) s.resize(s.size() - 2);
  else if (ends_with("b") && s.size() > 1 && std::isalpha(static_cast<unsigned char>(s[s.size() - 2])))
    s.pop_back();
  int shift = 0;
  if (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back()))) {
    char u = s.back();
    shift = u == 'k' ? 10 : u == 'm' ? 20 : u == 'g' ? 30 : u == 't' ? 40 : -1;
    if (shift < 0) return false;
    s.pop_back();
  }
  if (!AllDigits(s)) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end) return false;
  if (v > (static_cast<unsigned long long>(INT64_MAX) >> shift)) return false;
  *out = static_cast<int64_t>(v << shift);
  return true;
}

bool ParseEnum(const std::string& text, const Spec& s, std::string* out) {
  std::string v = Lower(text);
  for (const auto& a : Split(s.allowed, '|'))
    if (v == a) return *out = v, true;
  return false;
}

[[noreturn]] void Invalid(const Spec& s, const std::string& text) {
  throw Error(std::string(s.name) + "=" + text + " is not valid: expected " + Accepts(s));
}

// The variable's text, else the default; nullopt when neither. Checks that the
// caller's getter matches the declared type.
std::optional<std::string> Text(Id id, const char* type) {
  const Spec& s = Of(id);
  if (std::strcmp(s.type, type) != 0)
    throw std::logic_error(std::string("torch_tpu setting ") + s.name + " is a " + s.type + ", read as a " + type);
  if (auto v = Raw(id)) return v;
  if (*s.default_value) return std::string(s.default_value);
  return std::nullopt;
}

template <class T>
T Required(Id id, const std::optional<T>& v) {
  if (!v) throw std::logic_error(std::string("torch_tpu setting ") + Of(id).name + " has no default");
  return *v;
}

}  // namespace

const std::vector<Spec>& All() { return kSpecs; }

const Spec& Of(Id id) { return kSpecs.at(static_cast<size_t>(id)); }

std::optional<std::string> Raw(Id id) {
  const char* v = std::getenv(Of(id).name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<bool> OptionalBool(Id id) {
  auto t = Text(id, "bool");
  if (!t) return std::nullopt;
  bool v;
  if (!ParseBool(*t, &v)) Invalid(Of(id), *t);
  return v;
}
bool Bool(Id id) { return Required(id, OptionalBool(id)); }

std::optional<int64_t> OptionalInt(Id id) {
  auto t = Text(id, "int");
  if (!t) return std::nullopt;
  int64_t v;
  if (!ParseInt(*t, Of(id), &v)) Invalid(Of(id), *t);
  return v;
}
int64_t Int(Id id) { return Required(id, OptionalInt(id)); }

std::optional<int64_t> OptionalBytes(Id id) {
  auto t = Text(id, "bytes");
  if (!t) return std::nullopt;
  int64_t v;
  if (!ParseBytes(*t, &v)) Invalid(Of(id), *t);
  return v;
}
int64_t Bytes(Id id) { return Required(id, OptionalBytes(id)); }

std::string Enum(Id id) {
  auto t = Text(id, "enum");
  if (!t) return "";
  std::string v;
  if (!ParseEnum(*t, Of(id), &v)) Invalid(Of(id), *t);
  return v;
}

std::string Path(Id id) { return Text(id, "path").value_or(""); }

std::vector<std::string> PathList(Id id) {
  std::vector<std::string> out;
  for (auto& d : Split(Text(id, "path_list").value_or(""), ':'))
    if (!d.empty()) out.push_back(d);
  return out;
}

std::string String(Id id) { return Text(id, "string").value_or(""); }

std::string Accepts(const Spec& s) {
  std::string type = s.type;
  if (type == "bool") return "one of 1, 0, true, false, yes, no, on, off";
  if (type == "int") {
    std::optional<int64_t> lo, hi;
    Bounds(s, &lo, &hi);
    if (hi) return "an integer from " + std::to_string(lo.value_or(INT64_MIN)) + " to " + std::to_string(*hi);
    return lo ? "an integer >= " + std::to_string(*lo) : "an integer";
  }
  if (type == "bytes") return "a byte count such as 1073741824, 512M or 2G";
  if (type == "enum" || type == "int_list") {
    std::string out = type == "enum" ? "one of " : "";
    auto words = Split(s.allowed, '|');
    for (size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + words[i];
    return type == "enum" ? out : out + " or sizes such as 16,64,256";
  }
  return "any text";
}

}  // namespace tt::settings
