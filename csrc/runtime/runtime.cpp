// Runtime: the process-wide PJRT client, its devices, compilation, host
// transfers and the project's own memory accounting.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "runtime/compile_cache.h"
#include "runtime/host_heap.h"
#include "runtime/kv_store.h"
#include "runtime/pjrt_internal.h"
#include "runtime/program_dump.h"
#include "runtime/sha256.h"
#include "runtime/shared_cache.h"
#include "runtime/visible_devices.h"
#include "settings/settings.h"

namespace tt::runtime {

// --------------------------------------------------------------- elements ---
size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::Pred: case ElementType::S8: case ElementType::U8: return 1;
    case ElementType::F8E5M2: case ElementType::F8E4M3FN: return 1;
    case ElementType::S16: case ElementType::U16: case ElementType::F16: case ElementType::BF16: return 2;
    case ElementType::S32: case ElementType::U32: case ElementType::F32: return 4;
    case ElementType::S64: case ElementType::U64: case ElementType::F64: case ElementType::C64: return 8;
    case ElementType::C128: return 16;
    default: return 0;
  }
}

const char* element_name(ElementType t) {
  switch (t) {
    case ElementType::Pred: return "pred";
    case ElementType::S8: return "s8";
    case ElementType::S16: return "s16";
    case ElementType::S32: return "s32";
    case ElementType::S64: return "s64";
    case ElementType::U8: return "u8";
    case ElementType::U16: return "u16";
    case ElementType::U32: return "u32";
    case ElementType::U64: return "u64";
    case ElementType::F16: return "f16";
    case ElementType::F32: return "f32";
    case ElementType::F64: return "f64";
    case ElementType::BF16: return "bf16";
    case ElementType::C64: return "c64";
    case ElementType::C128: return "c128";
    case ElementType::F8E5M2: return "f8e5m2";
    case ElementType::F8E4M3FN: return "f8e4m3fn";
    default: return "invalid";
  }
}

// ----------------------------------------------------------------- errors ---
namespace detail {

int SwallowError(const Api& api, PJRT_Error* err, std::string* message) {
  if (!err) return 0;
  int code = 2;  // UNKNOWN
  auto gc = TT_ARGS(PJRT_Error_GetCode_Args);
  gc.error = err;
  if (PJRT_Error* e2 = api.Error_GetCode(&gc)) {
    auto d = TT_ARGS(PJRT_Error_Destroy_Args);
    d.error = e2;
    api.Error_Destroy(&d);
  } else {
    code = static_cast<int>(gc.code);
  }
  if (message) {
    auto m = TT_ARGS(PJRT_Error_Message_Args);
    m.error = err;
    api.Error_Message(&m);
    *message = m.message ? std::string(m.message, m.message_size) : std::string();
  }
  auto d = TT_ARGS(PJRT_Error_Destroy_Args);
  d.error = err;
  api.Error_Destroy(&d);
  return code;
}

PJRT_LoadedExecutable* CompileMlir(const Api& api, PJRT_Client* client, const std::string& mlir_text,
                                   const std::string& compile_options) {
  static const char kFormat[] = "mlir";
  auto prog = TT_ARGS(PJRT_Program);
  prog.code = const_cast<char*>(mlir_text.data());
  prog.code_size = mlir_text.size();
  prog.format = kFormat;
  prog.format_size = sizeof(kFormat) - 1;
  auto c = TT_ARGS(PJRT_Client_Compile_Args);
  c.client = client;
  c.program = &prog;
  c.compile_options = compile_options.data();
  c.compile_options_size = compile_options.size();
  ThrowIfError(api, api.Client_Compile(&c), "PJRT_Client_Compile");
  return c.executable;
}

void ThrowIfError(const Api& api, PJRT_Error* err, const char* what) {
  if (!err) return;
  std::string msg;
  int code = SwallowError(api, err, &msg);
  if (code == 0) code = 2;  // an error object always means failure
  throw Error(code, std::string(what) + ": " + msg);
}

void AwaitAndDestroyEvent(const Api& api, PJRT_Event* ev, const char* what) {
  if (!ev) return;
  auto a = TT_ARGS(PJRT_Event_Await_Args);
  a.event = ev;
  PJRT_Error* err = api.Event_Await(&a);
  auto d = TT_ARGS(PJRT_Event_Destroy_Args);
  d.event = ev;
  SwallowError(api, api.Event_Destroy(&d));
  ThrowIfError(api, err, what);
}

namespace {
std::atomic<Runtime*> g_runtime{nullptr};
std::mutex g_init_mu;

std::string EnvStr(const char* n) {
  const char* v = std::getenv(n);
  return v ? v : "";
}

bool ParseInt64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || !end || *end != '\0') return false;
  *out = v;
  return true;
}

// Serialized xla.CompileOptionsProto, by hand:
//   executable_build_options (3) { device_ordinal (1) = -1, num_replicas (4) = 1,
//                                  num_partitions (5) = 1 }
//   compile_portable_executable (4) = true
void PutVarint(std::string& s, uint64_t v) {
  while (v >= 0x80) { s.push_back(static_cast<char>((v & 0x7f) | 0x80)); v >>= 7; }
  s.push_back(static_cast<char>(v));
}
void PutTag(std::string& s, int field, int wire) { PutVarint(s, (static_cast<uint64_t>(field) << 3) | wire); }

const std::string& CompileOptionsBytes() {
  static const std::string bytes = [] {
    std::string build;
    PutTag(build, 1, 0); PutVarint(build, static_cast<uint64_t>(int64_t{-1}));
    PutTag(build, 4, 0); PutVarint(build, 1);
    PutTag(build, 5, 0); PutVarint(build, 1);
    std::string opts;
    PutTag(opts, 3, 2); PutVarint(opts, build.size()); opts += build;
    PutTag(opts, 4, 0); PutVarint(opts, 1);
    return opts;
  }();
  return bytes;
}

std::string Str(const char* p, size_t n) { return p ? std::string(p, n) : std::string(); }

}  // namespace

}  // namespace detail

// ---------------------------------------------------------------- runtime ---
struct DeviceStats {
  std::atomic<int64_t> live{0}, peak{0}, count{0};
};

struct Runtime::State {
  const detail::Api* api = nullptr;
  std::unique_ptr<DeviceStats[]> stats;
  std::vector<int64_t> capacity;
  std::vector<std::string> kinds, descriptions;
  bool is_cpu = false;
  std::unique_ptr<CompileCache> cache;
  // Everything a compile cache key holds besides the program text, hashed
  // once; a key is this state updated with the text.
  Sha256 key_prefix;
  std::atomic<bool> serialize_failed{false};  // the plugin refused once: stop trying
};

namespace {

// Appends a length-prefixed field, so that no two field lists hash alike.
void HashField(Sha256& h, const std::string& s) {
  uint64_t n = s.size();
  h.Update(&n, sizeof(n));
  h.Update(s);
}

// What makes a serialized executable valid to load: this key format, the
// plugin file (path, size, modification time), its PJRT API version,
// platform and version, attributes, the device kind, and our compile options.
Sha256 CacheKeyPrefix(const PluginInfo& info, const std::string& device_kind, const std::string& options) {
  Sha256 h;
  HashField(h, "torch_tpu compile cache key 1");
  HashField(h, info.path);
  struct stat st;
  if (::stat(info.path.c_str(), &st) == 0)
    HashField(h, std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                     std::to_string(st.st_mtim.tv_nsec));
  HashField(h, std::to_string(info.api_major) + "." + std::to_string(info.api_minor));
  HashField(h, info.platform_name);
  HashField(h, info.platform_version);
  for (const auto& a : info.attributes) HashField(h, a.first + "=" + a.second);
  HashField(h, device_kind);
  HashField(h, options);
  return h;
}

}  // namespace

Runtime& Runtime::Get() {
  if (Runtime* r = detail::g_runtime.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(detail::g_init_mu);
  if (Runtime* r = detail::g_runtime.load(std::memory_order_acquire)) return *r;
  std::unique_ptr<Runtime> rt(new Runtime());
  try {
    rt->Init();  // throws; a later call retries
  } catch (const settings::Error& e) {
    throw Error(3, e.what());  // a bad TORCH_TPU_* value, as every other start-up error
  }
  // Kept alive until process exit on purpose: buffers held by Python objects
  // may be freed during interpreter teardown, after static destructors.
  Runtime* r = rt.release();
  detail::g_runtime.store(r, std::memory_order_release);
  return *r;
}

bool Runtime::IsInitialized() { return detail::g_runtime.load(std::memory_order_acquire) != nullptr; }

void Runtime::Init() {
  using namespace detail;
  auto t0 = std::chrono::steady_clock::now();
  LoadedPlugin lp = LoadChosenPlugin();
  const Api& api = *lp.api;
  info_ = lp.info;
  api_ = &api;
  state_ = new State();
  state_->api = &api;

  // Create options: only the CPU plugin takes cpu_device_count.
  std::vector<PJRT_NamedValue> opts;
  static const char kCpuCount[] = "cpu_device_count";
  int64_t ndev = 1;
  bool is_cpu = info_.platform == "cpu";
  if (is_cpu) {
    KeepHostHeap();  // its device memory is the heap (host_heap.h); before its threads start
    // TORCH_TPU_NUM_DEVICES, else torchrun's LOCAL_WORLD_SIZE (so that
    // set_device(LOCAL_RANK) works on every local rank, as on CUDA), else 1.
    if (auto n = settings::OptionalInt(settings::Id::TORCH_TPU_NUM_DEVICES)) {
      ndev = *n;
    } else {
      std::string s = EnvStr("LOCAL_WORLD_SIZE");
      if (!s.empty() && (!ParseInt64(s, &ndev) || ndev < 1 || ndev > 4096))
        throw Error(3, "LOCAL_WORLD_SIZE=" + s + " is not a positive device count.");
    }
    auto nv = TT_ARGS(PJRT_NamedValue);
    nv.name = kCpuCount;
    nv.name_size = sizeof(kCpuCount) - 1;
    nv.type = PJRT_NamedValue_kInt64;
    nv.int64_value = ndev;
    nv.value_size = 1;
    opts.push_back(nv);
  }
  auto cc = TT_ARGS(PJRT_Client_Create_Args);
  cc.create_options = opts.empty() ? nullptr : opts.data();
  cc.num_options = opts.size();
  const bool with_store = BeginClientCreate(&cc);  // kv callbacks, only when a store was registered
  ThrowIfError(api, api.Client_Create(&cc), ("PJRT_Client_Create (" + info_.path + ")").c_str());
  client_ = cc.client;
  if (with_store) MarkClientCreatedWithKeyValueStore();

  auto pn = TT_ARGS(PJRT_Client_PlatformName_Args);
  pn.client = static_cast<PJRT_Client*>(client_);
  ThrowIfError(api, api.Client_PlatformName(&pn), "PJRT_Client_PlatformName");
  info_.platform_name = Str(pn.platform_name, pn.platform_name_size);
  if (api.Client_PlatformVersion) {
    auto pv = TT_ARGS(PJRT_Client_PlatformVersion_Args);
    pv.client = static_cast<PJRT_Client*>(client_);
    ThrowIfError(api, api.Client_PlatformVersion(&pv), "PJRT_Client_PlatformVersion");
    info_.platform_version = Str(pv.platform_version, pv.platform_version_size);
  }
  if (info_.platform.empty()) {
    std::string n = info_.platform_name;
    info_.platform = (n == "gpu" || n == "cuda") ? "cuda" : n;
  }
  state_->is_cpu = info_.platform == "cpu";

  auto ad = TT_ARGS(PJRT_Client_AddressableDevices_Args);
  ad.client = static_cast<PJRT_Client*>(client_);
  ThrowIfError(api, api.Client_AddressableDevices(&ad), "PJRT_Client_AddressableDevices");
  for (size_t i = 0; i < ad.num_addressable_devices; ++i) devices_.push_back(ad.addressable_devices[i]);
  devices_ = SelectVisibleDevices(devices_, EnvStr("TPU_VISIBLE_DEVICES"));
  if (devices_.empty())
    throw Error(9, "PJRT plugin " + info_.path + " reports no addressable devices.");

  const size_t n = devices_.size();
  state_->stats.reset(new DeviceStats[n]);
  const int64_t env_limit = settings::OptionalBytes(settings::Id::TORCH_TPU_MEMORY_LIMIT).value_or(-1);
  int64_t host_mem = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  for (size_t i = 0; i < n; ++i) {
    auto* dev = static_cast<PJRT_Device*>(devices_[i]);
    auto gd = TT_ARGS(PJRT_Device_GetDescription_Args);
    gd.device = dev;
    ThrowIfError(api, api.Device_GetDescription(&gd), "PJRT_Device_GetDescription");
    std::string kind, desc;
    if (api.DeviceDescription_Kind) {
      auto k = TT_ARGS(PJRT_DeviceDescription_Kind_Args);
      k.device_description = gd.device_description;
      ThrowIfError(api, api.DeviceDescription_Kind(&k), "PJRT_DeviceDescription_Kind");
      kind = Str(k.device_kind, k.device_kind_size);
    }
    if (api.DeviceDescription_DebugString) {
      auto d = TT_ARGS(PJRT_DeviceDescription_DebugString_Args);
      d.device_description = gd.device_description;
      ThrowIfError(api, api.DeviceDescription_DebugString(&d), "PJRT_DeviceDescription_DebugString");
      desc = Str(d.debug_string, d.debug_string_size);
    }
    state_->kinds.push_back(kind);
    state_->descriptions.push_back(desc);

    int64_t cap = -1;
    if (api.Device_MemoryStats) {
      auto ms = TT_ARGS(PJRT_Device_MemoryStats_Args);
      ms.device = dev;
      PJRT_Error* err = api.Device_MemoryStats(&ms);
      if (err) SwallowError(api, err);  // CPU plugins: UNIMPLEMENTED
      else if (ms.bytes_limit_is_set && ms.bytes_limit > 0) cap = ms.bytes_limit;
    }
    if (env_limit >= 0) cap = cap < 0 ? env_limit : std::min(cap, env_limit);
    if (cap < 0) cap = state_->is_cpu && host_mem > 0 ? host_mem : INT64_MAX;
    state_->capacity.push_back(cap);
  }

  state_->cache = std::make_unique<CompileCache>(CompileCacheConfig::FromEnv());
  state_->key_prefix = CacheKeyPrefix(info_, state_->kinds.empty() ? "" : state_->kinds[0], CompileOptionsBytes());

  if (LogEnabled()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "[torch_tpu] PJRT plugin %s\n[torch_tpu]   platform %s (%s), reason: %s\n"
                 "[torch_tpu]   PJRT API %d.%d (ours %d.%d), %s %s, %zu device(s), init %.1f ms\n",
                 info_.path.c_str(), info_.platform.c_str(), info_.platform_name.c_str(),
                 info_.reason.c_str(), info_.api_major, info_.api_minor, info_.header_major,
                 info_.header_minor, info_.platform_name.c_str(), info_.platform_version.c_str(), n, ms);
    for (const auto& a : info_.attributes)
      std::fprintf(stderr, "[torch_tpu]   attribute %s = %s\n", a.first.c_str(), a.second.c_str());
    const auto& cc = state_->cache->config();
    std::fprintf(stderr, "[torch_tpu]   compile cache: %s (%s)%s\n", cc.enabled ? cc.dir.c_str() : "off",
                 cc.source.c_str(), can_serialize() ? "" : "; the plugin cannot serialize executables");
  }
}

CompileCache& Runtime::compile_cache() const { return *state_->cache; }

bool Runtime::can_serialize() const {
  return state_->api->Executable_Serialize && state_->api->Executable_DeserializeAndLoad &&
         !state_->serialize_failed.load(std::memory_order_relaxed);
}

Runtime::~Runtime() {
  if (client_ && state_ && state_->api) {
    auto d = TT_ARGS(PJRT_Client_Destroy_Args);
    d.client = static_cast<PJRT_Client*>(client_);
    detail::SwallowError(*state_->api, state_->api->Client_Destroy(&d));
  }
  delete state_;
}

void Runtime::CheckDevice(int device) const {
  if (device < 0 || device >= device_count())
    throw Error(3, "invalid device index " + std::to_string(device) + ": there are " +
                       std::to_string(device_count()) + " device(s) (tpu:0 .. tpu:" +
                       std::to_string(device_count() - 1) + ")");
}

std::string Runtime::device_kind(int device) const {
  CheckDevice(device);
  return state_->kinds[device];
}

std::string Runtime::device_description(int device) const {
  CheckDevice(device);
  return state_->descriptions[device];
}

int64_t Runtime::live_bytes(int device) const {
  CheckDevice(device);
  return state_->stats[device].live.load(std::memory_order_relaxed);
}
int64_t Runtime::peak_bytes(int device) const {
  CheckDevice(device);
  return state_->stats[device].peak.load(std::memory_order_relaxed);
}
int64_t Runtime::live_buffers(int device) const {
  CheckDevice(device);
  return state_->stats[device].count.load(std::memory_order_relaxed);
}
void Runtime::reset_peak(int device) {
  CheckDevice(device);
  auto& s = state_->stats[device];
  s.peak.store(s.live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}
int64_t Runtime::memory_capacity(int device) const {
  CheckDevice(device);
  return state_->capacity[device];
}

void Runtime::Account(int device, int64_t bytes, int64_t buffers) {
  if (device < 0 || device >= device_count()) return;
  auto& s = state_->stats[device];
  int64_t now = s.live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  s.count.fetch_add(buffers, std::memory_order_relaxed);
  int64_t peak = s.peak.load(std::memory_order_relaxed);
  while (now > peak && !s.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void Runtime::CheckCapacity(int device, int64_t bytes) const {
  int64_t cap = state_->capacity[device];
  int64_t live = state_->stats[device].live.load(std::memory_order_relaxed);
  if (bytes > cap - live) {
    std::ostringstream m;
    m << "out of memory on tpu:" << device << ": tried to allocate " << bytes << " bytes; " << live
      << " bytes in use of " << cap;
    throw Error(8, m.str());
  }
}

BufferPtr Runtime::StartFromHost(const void* data, ElementType t, const std::vector<int64_t>& dims, int device,
                                 int semantics, void** done_event) {
  const auto& api = *state_->api;
  CheckDevice(device);
  if (element_size(t) == 0) throw Error(3, "FromHost: invalid element type");
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(3, "FromHost: negative dimension");
    if (d != 0 && numel > INT64_MAX / d) throw Error(8, "FromHost: shape too large");
    numel *= d;
  }
  if (numel > INT64_MAX / static_cast<int64_t>(element_size(t)))
    throw Error(8, "FromHost: shape too large");
  int64_t bytes = numel * static_cast<int64_t>(element_size(t));
  CheckCapacity(device, bytes);
  static const char kDummy[16] = {0};
  auto a = TT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  a.client = static_cast<PJRT_Client*>(client_);
  a.data = (data && bytes) ? data : kDummy;
  a.type = static_cast<PJRT_Buffer_Type>(t);
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = static_cast<PJRT_HostBufferSemantics>(semantics);
  a.device = static_cast<PJRT_Device*>(devices_[device]);
  detail::ThrowIfError(api, api.Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer");
  *done_event = a.done_with_host_buffer;
  try {
    return std::make_shared<Buffer>(a.buffer, t, dims, device);
  } catch (...) {
    detail::AwaitAndDestroyEvent(api, a.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer (host copy)");
    throw;
  }
}

BufferPtr Runtime::FromHost(const void* data, ElementType t, const std::vector<int64_t>& dims, int device) {
  void* done = nullptr;
  BufferPtr buf = StartFromHost(data, t, dims, device, PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, &done);
  // The data was copied during the call; the event is (or soon will be)
  // ready. Await it so the "host memory may be reused" promise holds even
  // for a plugin that finishes the copy late.
  detail::AwaitAndDestroyEvent(*state_->api, static_cast<PJRT_Event*>(done),
                               "PJRT_Client_BufferFromHostBuffer (host copy)");
  return buf;
}

namespace {
// Held by a pending host-to-device transfer until the plugin is done reading.
struct HostKeepAlive {
  const detail::Api* api;
  std::shared_ptr<void> owner;
};
void ReleaseHostMemory(PJRT_Error* error, void* arg) {
  auto* k = static_cast<HostKeepAlive*>(arg);
  // A failed transfer also fails the buffer: the error surfaces where the
  // buffer is used; here it is only freed.
  detail::SwallowError(*k->api, error);
  delete k;
}
}  // namespace

bool Runtime::host_copy_in_call() const { return state_->is_cpu; }

BufferPtr Runtime::FromHostAsync(const void* data, ElementType t, const std::vector<int64_t>& dims, int device,
                                 std::shared_ptr<void> keep_alive) {
  void* done = nullptr;
  BufferPtr buf =
      StartFromHost(data, t, dims, device, PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
  ReleaseWhenDone(done, std::move(keep_alive));
  return buf;
}

bool Runtime::can_alias_host() const { return state_->is_cpu; }

BufferPtr Runtime::FromHostAliased(const void* data, ElementType t, const std::vector<int64_t>& dims, int device,
                                   std::shared_ptr<void> keep_alive) {
  if (!can_alias_host()) return FromHost(data, t, dims, device);
  void* done = nullptr;
  BufferPtr buf = StartFromHost(data, t, dims, device, PJRT_HostBufferSemantics_kImmutableZeroCopy, &done);
  ReleaseWhenDone(done, std::move(keep_alive));
  return buf;
}

void Runtime::ReleaseWhenDone(void* done_event, std::shared_ptr<void> keep_alive) {
  const auto& api = *state_->api;
  auto* done = static_cast<PJRT_Event*>(done_event);
  if (!done) return;  // the plugin finished with the host memory during the call
  if (api.Event_OnReady) {
    auto* k = new HostKeepAlive{&api, std::move(keep_alive)};
    auto r = TT_ARGS(PJRT_Event_OnReady_Args);
    r.event = done;
    r.callback = &ReleaseHostMemory;
    r.user_arg = k;
    PJRT_Error* err = api.Event_OnReady(&r);
    if (!err) {
      // The callback holds its own reference to the completion; the event
      // handle itself is ours to destroy now (as XLA's own C API client does).
      auto d = TT_ARGS(PJRT_Event_Destroy_Args);
      d.event = done;
      detail::SwallowError(api, api.Event_Destroy(&d));
      return;
    }
    detail::SwallowError(api, err);
    keep_alive = std::move(k->owner);
    delete k;
  }
  detail::AwaitAndDestroyEvent(api, done, "PJRT_Client_BufferFromHostBuffer (host copy)");
}

BufferPtr Runtime::CopyToDevice(const Buffer& src, int device) {
  const auto& api = *state_->api;
  CheckDevice(device);
  if (src.device() == device)
    throw Error(3, "CopyToDevice: the buffer is already on tpu:" + std::to_string(device));
  CheckCapacity(device, static_cast<int64_t>(src.nbytes()));
  auto a = TT_ARGS(PJRT_Buffer_CopyToDevice_Args);
  a.buffer = static_cast<PJRT_Buffer*>(src.raw());
  a.dst_device = static_cast<PJRT_Device*>(devices_[device]);
  detail::ThrowIfError(api, api.Buffer_CopyToDevice(&a), "PJRT_Buffer_CopyToDevice");
  return std::make_shared<Buffer>(a.dst_buffer, src.type(), src.dims(), device);
}

ExecutablePtr Runtime::Compile(const std::string& mlir_text) { return Compile(mlir_text, CurrentCompileOverrides()); }

ExecutablePtr Runtime::Compile(const std::string& mlir_text, const CompileOverrides& overrides) {
  const auto& api = *state_->api;
  CompileCache& cache = *state_->cache;
  // With TORCH_TPU_DUMP_DIR, every program is compiled (not loaded from disk)
  // so that XLA writes its compiled form next to the StableHLO.
  const bool dump = !DumpDir().empty();
  const bool use_disk = cache.enabled() && can_serialize();
  CompileCache* shared = use_disk ? SharedCompileCache() : nullptr;  // shared_cache.h
  const std::string extra_options = overrides.serialized();
  Digest key{};
  // Loads the entry of `tier` for `key`; null when absent, rejected or not loadable.
  auto load = [&](CompileCache& tier, std::string* payload) -> ExecutablePtr {
    if (tier.Get(key, payload) != CompileCache::Lookup::Found) return nullptr;
    auto d = TT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
    d.client = static_cast<PJRT_Client*>(client_);
    d.serialized_executable = payload->data();
    d.serialized_executable_size = payload->size();
    auto t0 = std::chrono::steady_clock::now();
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    try {
      detail::ThrowIfError(api, api.Executable_DeserializeAndLoad(&d), "PJRT_Executable_DeserializeAndLoad");
      ExecutablePtr exe = WrapLoaded(d.loaded_executable, /*from_disk=*/true, nullptr);
      tier.RecordHit(since());
      return exe;
    } catch (const Error& e) {
      // A checksummed entry the plugin will not load (another plugin build
      // with the same version string, say): compile and replace it.
      tier.RecordUnusable(since());
      if (detail::LogEnabled())
        std::fprintf(stderr, "[torch_tpu] compile cache: cannot load %s: %s\n", tier.EntryPath(key).c_str(),
                     e.what());
      return nullptr;
    }
  };
  if (use_disk) {
    Sha256 h = state_->key_prefix;
    if (!extra_options.empty()) HashField(h, extra_options);
    HashField(h, mlir_text);
    key = h.Final();
    std::string payload;
    if (!dump) {
      if (ExecutablePtr exe = load(cache, &payload)) return exe;
      if (shared) {
        if (ExecutablePtr exe = load(*shared, &payload)) {
          cache.Put(key, payload);  // read-through: the next run finds it locally
          return exe;
        }
      }
    }
  }

  std::string dump_options;
  if (dump) dump_options = DumpProgram(ToHex(Sha256::Of(extra_options + mlir_text)), mlir_text);
  PJRT_LoadedExecutable* loaded = detail::CompileMlir(api, static_cast<PJRT_Client*>(client_), mlir_text,
                                                      detail::CompileOptionsBytes() + extra_options + dump_options);
  std::string serialized;
  double serialize_seconds = 0;
  ExecutablePtr exe = WrapLoaded(loaded, /*from_disk=*/false, use_disk ? &serialized : nullptr,
                                 &serialize_seconds);
  if (!serialized.empty()) {
    cache.Put(key, serialized, serialize_seconds);
    if (shared) shared->Put(key, serialized);  // write-back
  }
  return exe;
}

ExecutablePtr Runtime::WrapLoaded(void* loaded_ptr, bool from_disk, std::string* serialized,
                                  double* serialize_seconds) {
  const auto& api = *state_->api;
  auto* loaded = static_cast<PJRT_LoadedExecutable*>(loaded_ptr);
  auto exe = std::make_shared<Executable>(loaded, 0);  // owns it from here
  exe->from_disk_ = from_disk;

  auto ge = TT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  ge.loaded_executable = loaded;
  detail::ThrowIfError(api, api.LoadedExecutable_GetExecutable(&ge), "PJRT_LoadedExecutable_GetExecutable");
  struct ExeGuard {
    const detail::Api& api;
    PJRT_Executable* e;
    ~ExeGuard() {
      auto d = TT_ARGS(PJRT_Executable_Destroy_Args);
      d.executable = e;
      detail::SwallowError(api, api.Executable_Destroy(&d));
    }
  } guard{api, ge.executable};

  auto no = TT_ARGS(PJRT_Executable_NumOutputs_Args);
  no.executable = ge.executable;
  detail::ThrowIfError(api, api.Executable_NumOutputs(&no), "PJRT_Executable_NumOutputs");
  auto ot = TT_ARGS(PJRT_Executable_OutputElementTypes_Args);
  ot.executable = ge.executable;
  detail::ThrowIfError(api, api.Executable_OutputElementTypes(&ot), "PJRT_Executable_OutputElementTypes");
  auto od = TT_ARGS(PJRT_Executable_OutputDimensions_Args);
  od.executable = ge.executable;
  detail::ThrowIfError(api, api.Executable_OutputDimensions(&od), "PJRT_Executable_OutputDimensions");
  if (ot.num_output_types != no.num_outputs || od.num_outputs != no.num_outputs)
    throw Error(13, "PJRT_Client_Compile: the plugin reports " + std::to_string(no.num_outputs) +
                        " outputs but " + std::to_string(ot.num_output_types) + " output types and " +
                        std::to_string(od.num_outputs) + " output shapes");
  exe->num_outputs_ = static_cast<int>(no.num_outputs);
  size_t pos = 0;
  for (size_t i = 0; i < no.num_outputs; ++i) {
    int t = static_cast<int>(ot.output_types[i]);
    if (t <= 0 || t > static_cast<int>(ElementType::F8E4M3FN))
      throw Error(12, "compiled program output " + std::to_string(i) + " has PJRT element type " +
                          std::to_string(t) + ", which torch_tpu does not support");
    exe->out_types_.push_back(static_cast<ElementType>(t));
    exe->out_dims_.emplace_back(od.dims + pos, od.dims + pos + od.dim_sizes[i]);
    pos += od.dim_sizes[i];
  }

  if (serialized) {
    auto t0 = std::chrono::steady_clock::now();
    serialized->clear();
    auto sa = TT_ARGS(PJRT_Executable_Serialize_Args);
    sa.executable = ge.executable;
    std::string msg;
    if (int code = detail::SwallowError(api, api.Executable_Serialize(&sa), &msg)) {
      // Typically UNIMPLEMENTED: the plugin cannot serialize; stop asking.
      state_->serialize_failed.store(true, std::memory_order_relaxed);
      if (detail::LogEnabled())
        std::fprintf(stderr, "[torch_tpu] compile cache off: PJRT_Executable_Serialize failed [%d]: %s\n", code,
                     msg.c_str());
    } else {
      if (sa.serialized_bytes) serialized->assign(sa.serialized_bytes, sa.serialized_bytes_size);
      if (sa.serialized_executable_deleter && sa.serialized_executable)
        sa.serialized_executable_deleter(sa.serialized_executable);
    }
    if (serialize_seconds)
      *serialize_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return exe;
}

}  // namespace tt::runtime
