// torch_tpu runtime layer: PJRT through its C API. Knows nothing of PyTorch.
//
// One process-wide Runtime owns the loaded plugin and its client. Buffers and
// executables are RAII handles; every PJRT error becomes a tt::runtime::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/compile_options.h"

namespace tt::runtime {

// PJRT's own element-type numbering (PJRT_Buffer_Type), not xla::PrimitiveType.
enum class ElementType : int32_t {
  Invalid = 0, Pred = 1, S8 = 2, S16 = 3, S32 = 4, S64 = 5, U8 = 6, U16 = 7,
  U32 = 8, U64 = 9, F16 = 10, F32 = 11, F64 = 12, BF16 = 13, C64 = 14, C128 = 15,
  F8E5M2 = 16, F8E4M3FN = 17,  // PJRT_Buffer_Type numbering
};
size_t element_size(ElementType t);
const char* element_name(ElementType t);

// Which plugin to load, decided by the loader (see plugin_loader.cpp):
// TORCH_TPU_PJRT_PLUGIN, then TORCH_TPU_PLATFORM, then libtpu when a TPU is
// present, else the pinned CPU plugin.
struct PluginInfo {
  std::string path;           // file that was dlopen'ed
  std::string platform;       // "cpu", "tpu", "cuda" (what was asked for / found)
  std::string reason;         // why this plugin was chosen
  int api_major = 0, api_minor = 0;        // the plugin's PJRT API version
  int header_major = 0, header_minor = 0;  // the version we were declared against
  std::string platform_name;     // PJRT_Client_PlatformName
  std::string platform_version;  // PJRT_Client_PlatformVersion
  std::vector<std::pair<std::string, std::string>> attributes;  // plugin attributes, as text
};

class Buffer;
class Executable;
class Runtime;
class CompileCache;

// A host-visible completion event. Await() blocks; destroyed events are freed.
class Event {
 public:
  explicit Event(void* ev) : ev_(ev) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void Await();          // throws Error if the event carries an error
  bool IsReady() const;
  // Calls `done` once the event is ready, with "" or the error's message:
  // at once on this thread when it is ready already, else on a plugin thread
  // (where the plugin has no PJRT_Event_OnReady, this waits and calls it).
  // `done` must not throw. The event may be destroyed before `done` runs.
  void OnReady(std::function<void(const std::string& error)> done);
 private:
  void* ev_;
};

// An immutable PJRT device buffer. Destroying the handle frees device memory.
class Buffer {
 public:
  Buffer(void* buf, ElementType t, std::vector<int64_t> dims, int device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* raw() const { return buf_; }
  ElementType type() const { return type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int device() const { return device_; }
  int64_t numel() const;
  size_t nbytes() const { return numel() * element_size(type_); }

  // Copies the whole buffer (row-major, dense) into `dst` (nbytes() bytes);
  // blocks until the copy is done.
  void ToHost(void* dst, size_t dst_bytes) const;
  // Starts that copy, to happen once the value is computed, and returns its
  // event; `dst` must stay valid until the event is ready. Await() raises a
  // failed computation.
  std::unique_ptr<Event> ToHostAsync(void* dst, size_t dst_bytes) const;
  // Blocks until the buffer's value is computed (errors surface here).
  void BlockUntilReady() const;
  // Where the plugin keeps the buffer's bytes in this process's memory
  // (XLA's CPU plugin), waiting for the value to be computed: the address of
  // nbytes() dense row-major bytes, valid while this handle lives. nullptr
  // where the plugin's memory is not this process's, or it cannot say.
  const void* HostAddress() const;
  // The event that becomes ready when the buffer's value is computed (or its
  // computation failed). It stays valid after the buffer is destroyed.
  std::unique_ptr<Event> ReadyEvent() const;
  // Stops counting this buffer in live_bytes (for the runtime's own caches,
  // e.g. device copies of scalars, which are not user tensors).
  void ExcludeFromAccounting();
  // The buffer was donated to a program (its memory now belongs to that
  // program's result): it holds no value and no longer counts as live.
  void MarkDonated();
  bool donated() const { return donated_; }

 private:
  void* buf_;
  bool donated_ = false;
  ElementType type_;
  std::vector<int64_t> dims_;
  int device_;
  bool accounted_ = true;
};
using BufferPtr = std::shared_ptr<Buffer>;

// A compiled, loaded program. Execute runs it on one device, asynchronously:
// the outputs are returned at once and become ready later.
class Executable {
 public:
  Executable(void* loaded, int num_outputs);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  int num_outputs() const { return num_outputs_; }
  // Arguments whose parameter the program aliases to a result are donated
  // (the buffer becomes that result and is dead afterwards) unless listed in
  // `non_donatable`, where XLA copies instead.
  std::vector<BufferPtr> Execute(const std::vector<Buffer*>& args, int device,
                                 const std::vector<int64_t>& non_donatable = {}) const;
  void* raw() const { return loaded_; }
  // True when Runtime::Compile loaded it from the persistent compile cache
  // instead of compiling.
  bool from_disk() const { return from_disk_; }
  // For programs from Runtime::CompileReplicated: the device of each replica
  // (empty for single-device programs).
  const std::vector<int>& replica_devices() const { return replica_devices_; }
  // Runs a replicated program once over all its devices (replicated.cpp):
  // `args[i]` are replica i's arguments, all on replica_devices()[i]; returns
  // each replica's outputs, on its device. Asynchronous, like Execute.
  std::vector<std::vector<BufferPtr>> ExecuteReplicated(const std::vector<std::vector<Buffer*>>& args) const;
 private:
  void* loaded_;
  int num_outputs_;
  bool from_disk_ = false;
  std::vector<ElementType> out_types_;
  std::vector<std::vector<int64_t>> out_dims_;
  std::vector<int> replica_devices_;
  friend class Runtime;
};
using ExecutablePtr = std::shared_ptr<Executable>;

class Runtime {
 public:
  // The process-wide runtime; the first call loads the plugin and creates the
  // client (throws Error with an actionable message on failure; a later call
  // retries).
  static Runtime& Get();
  // True once Get() has succeeded (never loads anything).
  static bool IsInitialized();

  const PluginInfo& info() const { return info_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  std::string device_kind(int device) const;
  std::string device_description(int device) const;

  // Copies `data` (dense, row-major) into a new buffer on `device`. The host
  // memory may be reused as soon as this returns.
  BufferPtr FromHost(const void* data, ElementType t, const std::vector<int64_t>& dims, int device);
  // Like FromHost, but may return before the plugin has read `data`: the
  // host memory must stay unchanged until then. `keep_alive` (the owner of
  // `data`) is held until the plugin is done with it and released then,
  // possibly on a plugin thread. Where the plugin cannot tell when it is done
  // (no PJRT_Event_OnReady), this waits, like FromHost.
  BufferPtr FromHostAsync(const void* data, ElementType t, const std::vector<int64_t>& dims, int device,
                          std::shared_ptr<void> keep_alive);
  // Like FromHostAsync, but on plugins that can (XLA's CPU plugin, where
  // device memory is host memory: can_alias_host()) the buffer uses `data`
  // as its own memory instead of copying it (PJRT zero copy), so `data` must
  // stay alive and unchanged for the buffer's whole life: `keep_alive` is
  // released once the plugin is done with it (the buffer destroyed, or the
  // copy finished where the plugin copied after all). `data` should be
  // 64-byte aligned (the CPU plugin copies otherwise). Elsewhere this is
  // FromHost and releases `keep_alive` before returning.
  BufferPtr FromHostAliased(const void* data, ElementType t, const std::vector<int64_t>& dims, int device,
                            std::shared_ptr<void> keep_alive);
  // Whether FromHostAliased can alias host memory on this plugin.
  bool can_alias_host() const;
  // True for plugins that copy host memory during the transfer call anyway
  // (XLA's CPU plugin: measured, FromHostAsync of 64 MiB returns only when the
  // copy is done), where FromHostAsync gains nothing over FromHost.
  bool host_copy_in_call() const;
  // Copies a buffer to another device.
  BufferPtr CopyToDevice(const Buffer& src, int device);
  // Compiles StableHLO text (MLIR) for any device (portable executable).
  // Goes through the persistent compile cache (compile_cache.h) when it is on
  // and the plugin can serialize executables: a valid entry is loaded instead
  // of compiling; otherwise the program is compiled and its serialization
  // stored. Cache problems never fail a compile.
  // `overrides` (compile_options.h) are part of the persistent cache key when
  // not the defaults; the one-argument form uses CurrentCompileOverrides().
  ExecutablePtr Compile(const std::string& mlir_text);
  ExecutablePtr Compile(const std::string& mlir_text, const CompileOverrides& overrides);
  // Compiles StableHLO text whose module has mhlo.num_replicas =
  // devices.size() with num_replicas and a device assignment that puts
  // replica i on `devices[i]` (distinct devices), for
  // Executable::ExecuteReplicated (replicated.cpp). Not cached on disk.
  ExecutablePtr CompileReplicated(const std::string& mlir_text, const std::vector<int>& devices);
  // The persistent compile cache (configured from the environment at init;
  // enabled() is false when it is off).
  CompileCache& compile_cache() const;
  // Whether the plugin can serialize and load executables (else the cache
  // stores nothing).
  bool can_serialize() const;

  // The project's own memory accounting: bytes of live Buffers per device
  // (every Buffer counts from construction to destruction), and the peak.
  int64_t live_bytes(int device) const;
  int64_t peak_bytes(int device) const;
  int64_t live_buffers(int device) const;
  void reset_peak(int device);
  // Usable device memory: PJRT_Device_MemoryStats' limit where the plugin
  // reports one, else TORCH_TPU_MEMORY_LIMIT (bytes) or the host's physical
  // memory for the CPU plugin (no limit for other plugins). When both a
  // plugin limit and TORCH_TPU_MEMORY_LIMIT exist, the smaller wins. Read once
  // at init. Allocations past it raise an out-of-memory Error (code 8).
  int64_t memory_capacity(int device) const;

  ~Runtime();
 private:
  Runtime() = default;
  void Init();                          // loads the plugin, creates the client
  void CheckDevice(int device) const;   // throws Error(3) when out of range
  // Throws the out-of-memory Error when `bytes` more would pass the capacity.
  void CheckCapacity(int device, int64_t bytes) const;
  // FromHost, FromHostAsync and FromHostAliased: issues the transfer;
  // returns the buffer and the plugin's done-with-host-memory event (may be
  // NULL).
  // `semantics` is a PJRT_HostBufferSemantics value.
  BufferPtr StartFromHost(const void* data, ElementType t, const std::vector<int64_t>& dims, int device,
                          int semantics, void** done_event);
  // Holds `keep_alive` until `done_event` (a PJRT_Event*, may be NULL) fires,
  // then releases it (waits for it where the plugin has no OnReady).
  void ReleaseWhenDone(void* done_event, std::shared_ptr<void> keep_alive);
  void Account(int device, int64_t bytes, int64_t buffers);  // Buffer ctor/dtor
  // Takes ownership of a PJRT_LoadedExecutable and reads its output
  // signature; with `serialized`, also serializes it there ("" if the plugin
  // cannot), taking `*serialize_seconds`.
  ExecutablePtr WrapLoaded(void* loaded, bool from_disk, std::string* serialized,
                           double* serialize_seconds = nullptr);
  struct State;                         // accounting, device strings (runtime.cpp)
  State* state_ = nullptr;
  PluginInfo info_;
  const void* api_ = nullptr;   // const PJRT_Api*
  void* client_ = nullptr;      // PJRT_Client*
  std::vector<void*> devices_;  // addressable PJRT_Device*
  friend class Buffer;
  friend class Executable;
  friend class Event;
};

// Test hook: loads, version-checks and initialises the plugin file at `path`
// (no client is created) and returns what is known of it; throws Error with
// the same messages the runtime would give.
PluginInfo LoadPluginForTest(const std::string& path);

}  // namespace tt::runtime
