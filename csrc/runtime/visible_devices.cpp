#include "runtime/visible_devices.h"

#include <set>
#include <sstream>

#include "runtime/error.h"

namespace tt::runtime {

std::vector<void*> SelectVisibleDevices(const std::vector<void*>& devices, const std::string& spec) {
  if (spec.empty()) return devices;
  std::vector<size_t> picked;
  std::set<size_t> seen;
  std::stringstream in(spec);
  std::string item;
  auto bad = [&](const std::string& why) {
    return Error(3, "TPU_VISIBLE_DEVICES=" + spec + ": " + why + " (this plugin has " +
                        std::to_string(devices.size()) + " device(s), numbered from 0)");
  };
  while (std::getline(in, item, ',')) {
    size_t end = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end != item.size() || item.empty() || v < 0) throw bad("'" + item + "' is not a device index");
    picked.push_back(static_cast<size_t>(v));
    if (!seen.insert(static_cast<size_t>(v)).second) throw bad("device " + item + " is listed twice");
  }
  if (picked.empty()) throw bad("no device listed");
  if (picked.size() == devices.size()) return devices;  // the plugin applied it
  std::vector<void*> out;
  for (size_t i : picked) {
    if (i >= devices.size()) throw bad("device " + std::to_string(i) + " does not exist");
    out.push_back(devices[i]);
  }
  return out;
}

}  // namespace tt::runtime
