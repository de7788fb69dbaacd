// Which PJRT plugin to load, loading it, and checking it is one we can use.
//
// Choice, first match wins:
//   1. TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so  (an explicit file)
//   2. TORCH_TPU_PLATFORM=tpu|cpu|cuda            (look that plugin up)
//   3. libtpu, when TPU hardware is present       (never without it)
//   4. the CPU plugin
// Plugins are looked up under each directory of TORCH_TPU_PLUGIN_SEARCH_PATH
// (colon-separated site-packages dirs; the Python package sets it):
//   cpu:  lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so
//   tpu:  libtpu/libtpu.so
//   cuda: jax_plugins/xla_cuda13/xla_cuda_plugin.so, jax_plugins/xla_cuda12/...
// A plugin is dlopen'ed RTLD_NOW|RTLD_LOCAL and never dlclose'd; its
// PJRT_Plugin_Initialize runs once per process.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "runtime/pjrt_internal.h"
#include "settings/settings.h"

namespace tt::runtime {
namespace detail {
namespace {

constexpr const char* kCpuInstall = "pip install lammps-jax-pjrt-cpu==0.11.2";

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsRegularFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> SearchDirs() { return settings::PathList(settings::Id::TORCH_TPU_PLUGIN_SEARCH_PATH); }

std::vector<std::string> Candidates(const std::string& platform) {
  if (platform == "cpu") return {"lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"};
  if (platform == "tpu") return {"libtpu/libtpu.so"};
  if (platform == "cuda")
    return {"jax_plugins/xla_cuda13/xla_cuda_plugin.so", "jax_plugins/xla_cuda12/xla_cuda_plugin.so"};
  return {};
}

// Returns the first existing candidate; appends every path tried to `tried`.
std::string FindPlugin(const std::string& platform, std::vector<std::string>* tried) {
  for (const auto& dir : SearchDirs())
    for (const auto& rel : Candidates(platform)) {
      std::string p = dir + "/" + rel;
      tried->push_back(p);
      if (IsRegularFile(p)) return p;
    }
  return {};
}

std::string InstallHint(const std::string& platform) {
  if (platform == "cpu") return kCpuInstall;
  if (platform == "tpu") return "pip install libtpu";
  if (platform == "cuda") return "pip install jax-cuda12-plugin (or jax-cuda13-plugin)";
  return "";
}

Error NotFound(const std::string& platform, const std::string& why,
               const std::vector<std::string>& tried) {
  std::ostringstream m;
  m << "no PJRT plugin found for platform '" << platform << "' (" << why << "). ";
  if (tried.empty()) {
    m << "TORCH_TPU_PLUGIN_SEARCH_PATH is empty or unset, so nothing was searched; "
         "set it to your site-packages directories (colon-separated). ";
  } else {
    m << "Searched:";
    for (const auto& t : tried) m << "\n  " << t;
    m << "\n";
  }
  m << "Install it with `" << InstallHint(platform)
    << "`, or set TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so.";
  return Error(5, m.str());
}

// Google's PCI vendor id on a device node that TPU drivers expose.
bool TpuPresent() {
  bool node = false;
  if (DIR* d = ::opendir("/dev")) {
    while (dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, "accel", 5) == 0) node = true;
    ::closedir(d);
  }
  if (!node) {
    if (DIR* d = ::opendir("/dev/vfio")) {
      while (dirent* e = ::readdir(d))
        if (std::isdigit(static_cast<unsigned char>(e->d_name[0]))) node = true;
      ::closedir(d);
    }
  }
  if (!node) return false;
  bool google = false;
  if (DIR* d = ::opendir("/sys/bus/pci/devices")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(std::string("/sys/bus/pci/devices/") + e->d_name + "/vendor");
      std::string v;
      if (f >> v && Lower(v) == "0x1ae0") { google = true; break; }
    }
    ::closedir(d);
  }
  return google;
}

std::string GuessPlatformFromPath(const std::string& path) {
  std::string base = Lower(path.substr(path.find_last_of('/') + 1));
  if (base.find("tpu") != std::string::npos) return "tpu";
  if (base.find("cuda") != std::string::npos || base.find("gpu") != std::string::npos) return "cuda";
  if (base.find("cpu") != std::string::npos) return "cpu";
  return "";
}

template <class Fn>
void Resolve(const PJRT_Api* raw, int slot, Fn*& out) {
  out = reinterpret_cast<Fn*>(tt_pjrt_api_slot(raw, slot));
}

void ResolveAll(Api& a) {
  const PJRT_Api* r = a.raw;
  Resolve(r, TT_PJRT_SLOT_Error_Destroy, a.Error_Destroy);
  Resolve(r, TT_PJRT_SLOT_Error_Message, a.Error_Message);
  Resolve(r, TT_PJRT_SLOT_Error_GetCode, a.Error_GetCode);
  Resolve(r, TT_PJRT_SLOT_Plugin_Initialize, a.Plugin_Initialize);
  Resolve(r, TT_PJRT_SLOT_Plugin_Attributes, a.Plugin_Attributes);
  Resolve(r, TT_PJRT_SLOT_Event_Destroy, a.Event_Destroy);
  Resolve(r, TT_PJRT_SLOT_Event_IsReady, a.Event_IsReady);
  Resolve(r, TT_PJRT_SLOT_Event_Error, a.Event_Error);
  Resolve(r, TT_PJRT_SLOT_Event_Await, a.Event_Await);
  Resolve(r, TT_PJRT_SLOT_Event_OnReady, a.Event_OnReady);
  Resolve(r, TT_PJRT_SLOT_Client_Create, a.Client_Create);
  Resolve(r, TT_PJRT_SLOT_Client_Destroy, a.Client_Destroy);
  Resolve(r, TT_PJRT_SLOT_Client_PlatformName, a.Client_PlatformName);
  Resolve(r, TT_PJRT_SLOT_Client_PlatformVersion, a.Client_PlatformVersion);
  Resolve(r, TT_PJRT_SLOT_Client_AddressableDevices, a.Client_AddressableDevices);
  Resolve(r, TT_PJRT_SLOT_Client_Compile, a.Client_Compile);
  Resolve(r, TT_PJRT_SLOT_Client_BufferFromHostBuffer, a.Client_BufferFromHostBuffer);
  Resolve(r, TT_PJRT_SLOT_DeviceDescription_Id, a.DeviceDescription_Id);
  Resolve(r, TT_PJRT_SLOT_DeviceDescription_Kind, a.DeviceDescription_Kind);
  Resolve(r, TT_PJRT_SLOT_DeviceDescription_DebugString, a.DeviceDescription_DebugString);
  Resolve(r, TT_PJRT_SLOT_DeviceDescription_ToString, a.DeviceDescription_ToString);
  Resolve(r, TT_PJRT_SLOT_Device_GetDescription, a.Device_GetDescription);
  Resolve(r, TT_PJRT_SLOT_Device_MemoryStats, a.Device_MemoryStats);
  Resolve(r, TT_PJRT_SLOT_Executable_Destroy, a.Executable_Destroy);
  Resolve(r, TT_PJRT_SLOT_Executable_NumOutputs, a.Executable_NumOutputs);
  Resolve(r, TT_PJRT_SLOT_Executable_OutputElementTypes, a.Executable_OutputElementTypes);
  Resolve(r, TT_PJRT_SLOT_Executable_OutputDimensions, a.Executable_OutputDimensions);
  Resolve(r, TT_PJRT_SLOT_Executable_Serialize, a.Executable_Serialize);
  Resolve(r, TT_PJRT_SLOT_Executable_GetCostAnalysis, a.Executable_GetCostAnalysis);
  Resolve(r, TT_PJRT_SLOT_Executable_DeserializeAndLoad, a.Executable_DeserializeAndLoad);
  Resolve(r, TT_PJRT_SLOT_LoadedExecutable_Destroy, a.LoadedExecutable_Destroy);
  Resolve(r, TT_PJRT_SLOT_LoadedExecutable_GetExecutable, a.LoadedExecutable_GetExecutable);
  Resolve(r, TT_PJRT_SLOT_LoadedExecutable_Execute, a.LoadedExecutable_Execute);
  Resolve(r, TT_PJRT_SLOT_Buffer_Destroy, a.Buffer_Destroy);
  Resolve(r, TT_PJRT_SLOT_Buffer_ToHostBuffer, a.Buffer_ToHostBuffer);
  Resolve(r, TT_PJRT_SLOT_Buffer_ReadyEvent, a.Buffer_ReadyEvent);
  Resolve(r, TT_PJRT_SLOT_Buffer_CopyToDevice, a.Buffer_CopyToDevice);
  Resolve(r, TT_PJRT_SLOT_Buffer_OnDeviceSizeInBytes, a.Buffer_OnDeviceSizeInBytes);
  Resolve(r, TT_PJRT_SLOT_Buffer_UnsafePointer, a.Buffer_UnsafePointer);
}

// Names of required functions the plugin lacks.
std::vector<std::string> MissingRequired(const Api& a) {
  std::vector<std::string> miss;
  auto need = [&](const void* p, const char* name) { if (!p) miss.push_back(name); };
  need(reinterpret_cast<const void*>(a.Error_Destroy), "PJRT_Error_Destroy");
  need(reinterpret_cast<const void*>(a.Error_Message), "PJRT_Error_Message");
  need(reinterpret_cast<const void*>(a.Error_GetCode), "PJRT_Error_GetCode");
  need(reinterpret_cast<const void*>(a.Plugin_Initialize), "PJRT_Plugin_Initialize");
  need(reinterpret_cast<const void*>(a.Event_Destroy), "PJRT_Event_Destroy");
  need(reinterpret_cast<const void*>(a.Event_IsReady), "PJRT_Event_IsReady");
  need(reinterpret_cast<const void*>(a.Event_Await), "PJRT_Event_Await");
  need(reinterpret_cast<const void*>(a.Client_Create), "PJRT_Client_Create");
  need(reinterpret_cast<const void*>(a.Client_Destroy), "PJRT_Client_Destroy");
  need(reinterpret_cast<const void*>(a.Client_PlatformName), "PJRT_Client_PlatformName");
  need(reinterpret_cast<const void*>(a.Client_AddressableDevices), "PJRT_Client_AddressableDevices");
  need(reinterpret_cast<const void*>(a.Client_Compile), "PJRT_Client_Compile");
  need(reinterpret_cast<const void*>(a.Client_BufferFromHostBuffer), "PJRT_Client_BufferFromHostBuffer");
  need(reinterpret_cast<const void*>(a.Device_GetDescription), "PJRT_Device_GetDescription");
  need(reinterpret_cast<const void*>(a.Executable_Destroy), "PJRT_Executable_Destroy");
  need(reinterpret_cast<const void*>(a.Executable_NumOutputs), "PJRT_Executable_NumOutputs");
  need(reinterpret_cast<const void*>(a.Executable_OutputElementTypes), "PJRT_Executable_OutputElementTypes");
  need(reinterpret_cast<const void*>(a.Executable_OutputDimensions), "PJRT_Executable_OutputDimensions");
  need(reinterpret_cast<const void*>(a.LoadedExecutable_Destroy), "PJRT_LoadedExecutable_Destroy");
  need(reinterpret_cast<const void*>(a.LoadedExecutable_GetExecutable), "PJRT_LoadedExecutable_GetExecutable");
  need(reinterpret_cast<const void*>(a.LoadedExecutable_Execute), "PJRT_LoadedExecutable_Execute");
  need(reinterpret_cast<const void*>(a.Buffer_Destroy), "PJRT_Buffer_Destroy");
  need(reinterpret_cast<const void*>(a.Buffer_ToHostBuffer), "PJRT_Buffer_ToHostBuffer");
  need(reinterpret_cast<const void*>(a.Buffer_ReadyEvent), "PJRT_Buffer_ReadyEvent");
  need(reinterpret_cast<const void*>(a.Buffer_CopyToDevice), "PJRT_Buffer_CopyToDevice");
  return miss;
}

std::string NamedValueText(const PJRT_NamedValue& v, const std::string& name) {
  std::ostringstream o;
  switch (v.type) {
    case PJRT_NamedValue_kString:
      return v.string_value ? std::string(v.string_value, v.value_size) : std::string();
    case PJRT_NamedValue_kInt64:
      o << v.int64_value;
      break;
    case PJRT_NamedValue_kInt64List: {
      // Versions ("stablehlo_current_version": [1, 9, 3]) read best as 1.9.3.
      bool version = name.find("version") != std::string::npos;
      if (!version) o << "[";
      for (size_t i = 0; i < v.value_size; ++i) {
        if (i) o << (version ? "." : ", ");
        o << v.int64_array_value[i];
      }
      if (!version) o << "]";
      break;
    }
    case PJRT_NamedValue_kFloat:
      o << v.float_value;
      break;
    case PJRT_NamedValue_kBool:
      o << (v.bool_value ? "true" : "false");
      break;
    default:
      o << "<type " << static_cast<int>(v.type) << ">";
  }
  return o.str();
}

std::string VersionRefusal(const std::string& path, int major, int minor, const std::string& why) {
  std::ostringstream m;
  m << "refusing PJRT plugin " << path << ": it reports PJRT C API " << major << "." << minor
    << "; torch_tpu is built against " << TT_PJRT_API_MAJOR << "." << TT_PJRT_API_MINOR
    << " and accepts " << TT_PJRT_API_MAJOR << "." << kMinPluginMinor << " or newer with the same major ("
    << why << "). Install a newer plugin (for CPU: `" << kCpuInstall
    << "`) or point TORCH_TPU_PJRT_PLUGIN at a compatible plugin.";
  return m.str();
}

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Api>> by_path;         // resolved tables
  std::map<const PJRT_Api*, std::vector<std::pair<std::string, std::string>>> attrs;  // initialised
};
Registry& registry() {
  static Registry* r = new Registry();  // lives for the process, like the plugins
  return *r;
}

}  // namespace

bool LogEnabled() {
  static const bool on = settings::Bool(settings::Id::TORCH_TPU_LOG);  // a bad value throws here, at Runtime::Init
  return on;
}

LoadedPlugin LoadPluginFile(const std::string& path, const std::string& platform,
                            const std::string& reason) {
  if (!IsRegularFile(path)) {
    throw Error(5, "PJRT plugin file not found: " + path + " (" + reason +
                       "). Point TORCH_TPU_PJRT_PLUGIN at an existing plugin .so, or unset it to "
                       "use the default CPU plugin (" + kCpuInstall + ").");
  }
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);

  LoadedPlugin out;
  out.info.path = path;
  out.info.platform = platform;
  out.info.reason = reason;
  out.info.header_major = TT_PJRT_API_MAJOR;
  out.info.header_minor = TT_PJRT_API_MINOR;

  Api* api = nullptr;
  auto it = reg.by_path.find(path);
  if (it != reg.by_path.end()) {
    api = it->second.get();
  } else {
    dlerror();
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never dlclose'd
    if (!h) {
      const char* e = dlerror();
      throw Error(9, "cannot load PJRT plugin " + path + ": " + (e ? e : "dlopen failed") +
                         ". Check that the file is a PJRT plugin built for this machine, or set "
                         "TORCH_TPU_PJRT_PLUGIN to another one.");
    }
    auto* get = reinterpret_cast<GetPjrtApi_Fn*>(::dlsym(h, "GetPjrtApi"));
    if (!get)
      throw Error(9, path + " is not a PJRT plugin: it has no GetPjrtApi symbol.");
    const PJRT_Api* raw = get();
    if (!raw || raw->struct_size < sizeof(PJRT_Api))
      throw Error(9, "PJRT plugin " + path + " returned " + (raw ? "a truncated" : "no") +
                         " PJRT_Api table.");
    auto a = std::make_unique<Api>();
    a->raw = raw;
    a->table_size = raw->struct_size;
    a->major = raw->pjrt_api_version.major_version;
    a->minor = raw->pjrt_api_version.minor_version;
    if (a->major != TT_PJRT_API_MAJOR)
      throw Error(9, VersionRefusal(path, a->major, a->minor, "the major version differs: an ABI break"));
    if (a->minor < kMinPluginMinor)
      throw Error(9, VersionRefusal(path, a->major, a->minor, "it predates structs we use"));
    ResolveAll(*a);
    auto miss = MissingRequired(*a);
    if (!miss.empty()) {
      std::string names;
      for (const auto& n : miss) names += (names.empty() ? "" : ", ") + n;
      throw Error(9, VersionRefusal(path, a->major, a->minor,
                                    "its function table (" + std::to_string(a->table_size) +
                                        " bytes) lacks " + names));
    }
    api = a.get();
    reg.by_path[path] = std::move(a);
  }
  out.api = api;
  out.info.api_major = api->major;
  out.info.api_minor = api->minor;

  auto done = reg.attrs.find(api->raw);
  if (done == reg.attrs.end()) {
    auto init = TT_ARGS(PJRT_Plugin_Initialize_Args);
    ThrowIfError(*api, api->Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
    std::vector<std::pair<std::string, std::string>> attrs;
    if (api->Plugin_Attributes) {
      auto a = TT_ARGS(PJRT_Plugin_Attributes_Args);
      PJRT_Error* err = api->Plugin_Attributes(&a);
      if (err) {
        std::string msg;
        SwallowError(*api, err, &msg);
        attrs.emplace_back("error", msg);
      } else {
        for (size_t i = 0; i < a.num_attributes; ++i) {
          const PJRT_NamedValue& v = a.attributes[i];
          std::string name(v.name ? std::string(v.name, v.name_size) : std::string());
          attrs.emplace_back(name, NamedValueText(v, name));
        }
      }
    }
    done = reg.attrs.emplace(api->raw, std::move(attrs)).first;
  }
  out.info.attributes = done->second;
  return out;
}

LoadedPlugin LoadChosenPlugin() {
  std::string explicit_path = settings::Path(settings::Id::TORCH_TPU_PJRT_PLUGIN);
  std::string requested = settings::Enum(settings::Id::TORCH_TPU_PLATFORM);
  if (!explicit_path.empty()) {
    std::string platform = !requested.empty() ? requested : GuessPlatformFromPath(explicit_path);
    return LoadPluginFile(explicit_path, platform, "TORCH_TPU_PJRT_PLUGIN=" + explicit_path);
  }
  std::vector<std::string> tried;
  if (!requested.empty()) {
    std::string why = "TORCH_TPU_PLATFORM=" + requested;
    if (requested == "tpu" && !TpuPresent())
      throw Error(9, "TORCH_TPU_PLATFORM=tpu, but no TPU hardware was found (looked for /dev/accel* "
                     "or /dev/vfio/N with a PCI device of vendor 0x1ae0); libtpu is never loaded "
                     "without it. Unset TORCH_TPU_PLATFORM to use the CPU plugin, or set "
                     "TORCH_TPU_PJRT_PLUGIN=/path/to/libtpu.so to force it.");
    std::string p = FindPlugin(requested, &tried);
    if (p.empty()) throw NotFound(requested, why, tried);
    return LoadPluginFile(p, requested, why);
  }
  std::string reason;
  if (TpuPresent()) {
    std::string p = FindPlugin("tpu", &tried);
    if (!p.empty()) return LoadPluginFile(p, "tpu", "TPU hardware detected");
    reason = "TPU hardware detected but libtpu/libtpu.so is not in TORCH_TPU_PLUGIN_SEARCH_PATH "
             "(pip install libtpu); falling back to the CPU plugin";
  } else {
    reason = "no TPU hardware; default CPU plugin";
  }
  std::string p = FindPlugin("cpu", &tried);
  if (p.empty()) throw NotFound("cpu", reason, tried);
  return LoadPluginFile(p, "cpu", reason);
}

}  // namespace detail

PluginInfo LoadPluginForTest(const std::string& path) {
  return detail::LoadPluginFile(path, "", "LoadPluginForTest").info;
}

}  // namespace tt::runtime
