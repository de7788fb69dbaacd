// Prints how C++ reads each setting named on the command line, one line each:
//   NAME<TAB>value        (bool: true/false; int, bytes: decimal; path_list:
//                          items joined by '|'; unset without default: <none>)
//   NAME<TAB>error<TAB>message
// tests/test_settings.py runs it under chosen environments and compares with
// torch_tpu/settings.py. Exit status 2 for an undeclared name.
#include <cstdio>
#include <cstring>
#include <string>

#include "settings/settings.h"

using namespace tt::settings;

static std::string Show(Id id) {
  std::string type = Of(id).type;
  if (type == "bool") {
    auto v = OptionalBool(id);
    return v ? (*v ? "true" : "false") : "<none>";
  }
  if (type == "int") {
    auto v = OptionalInt(id);
    return v ? std::to_string(*v) : "<none>";
  }
  if (type == "bytes") {
    auto v = OptionalBytes(id);
    return v ? std::to_string(*v) : "<none>";
  }
  if (type == "enum") {
    std::string v = Enum(id);
    return v.empty() ? "<none>" : v;
  }
  if (type == "path") {
    std::string v = Path(id);
    return v.empty() ? "<none>" : v;
  }
  if (type == "path_list") {
    std::string out;
    for (const auto& d : PathList(id)) out += (out.empty() ? "" : "|") + d;
    return out;
  }
  if (type == "string") {
    std::string v = String(id);
    return v.empty() ? "<none>" : v;
  }
  return "<unread type " + type + ">";
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const auto& all = All();
    size_t k = 0;
    while (k < all.size() && std::strcmp(all[k].name, argv[i]) != 0) ++k;
    if (k == all.size()) {
      std::printf("%s\tundeclared\n", argv[i]);
      return 2;
    }
    try {
      std::printf("%s\t%s\n", argv[i], Show(static_cast<Id>(k)).c_str());
    } catch (const Error& e) {
      std::printf("%s\terror\t%s\n", argv[i], e.what());
    }
  }
  return 0;
}
