#include "runtime/executable_cost.h"

#include "runtime/pjrt_internal.h"

namespace tt::runtime {
namespace {

// The loaded plugin's function table (the loader keeps one per file, so
// this finds the one the runtime loaded).
const detail::Api& api() {
  static const detail::Api* a = [] {
    const PluginInfo& info = Runtime::Get().info();
    return detail::LoadPluginFile(info.path, info.platform, info.reason).api;
  }();
  return *a;
}

}  // namespace

std::vector<std::pair<std::string, double>> CostAnalysis(const Executable& exe) {
  std::vector<std::pair<std::string, double>> out;
  const detail::Api& a = api();
  if (!exe.raw() || !a.Executable_GetCostAnalysis) return out;
  auto ge = TT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  ge.loaded_executable = static_cast<PJRT_LoadedExecutable*>(exe.raw());
  if (detail::SwallowError(a, a.LoadedExecutable_GetExecutable(&ge))) return out;
  auto c = TT_ARGS(PJRT_Executable_GetCostAnalysis_Args);
  c.executable = ge.executable;
  // XLA's CPU plugin answers UNIMPLEMENTED ("GetCostAnalysis is not implemented").
  if (!detail::SwallowError(a, a.Executable_GetCostAnalysis(&c))) {
    for (size_t i = 0; i < c.num_properties; ++i) {
      const PJRT_NamedValue& v = c.properties[i];
      std::string name(v.name, v.name_size);
      if (v.type == PJRT_NamedValue_kFloat) out.emplace_back(name, v.float_value);
      if (v.type == PJRT_NamedValue_kInt64) out.emplace_back(name, static_cast<double>(v.int64_value));
    }
  }
  // The properties belong to this PJRT_Executable: copied above, freed here.
  auto d = TT_ARGS(PJRT_Executable_Destroy_Args);
  d.executable = ge.executable;
  detail::SwallowError(a, a.Executable_Destroy(&d));
  return out;
}

double Flops(const Executable& exe) {
  for (const auto& [name, value] : CostAnalysis(exe))
    if (name == "flops") return value;
  return -1;
}

std::vector<int> PluginExtensions() {
  std::vector<int> out;
  for (const PJRT_Extension_Base* e = api().raw->extension_start; e && out.size() < 64; e = e->next)
    out.push_back(e->type);
  return out;
}

}  // namespace tt::runtime
