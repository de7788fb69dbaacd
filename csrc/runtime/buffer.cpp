// Event, Buffer and Executable: RAII handles over PJRT objects.
#include <climits>

#include "runtime/pjrt_internal.h"

namespace tt::runtime {

// ------------------------------------------------------------------ Event ---
Event::~Event() {
  if (!ev_) return;
  Runtime& rt = Runtime::Get();
  const auto& api = *static_cast<const detail::Api*>(rt.api_);
  auto d = TT_ARGS(PJRT_Event_Destroy_Args);
  d.event = static_cast<PJRT_Event*>(ev_);
  detail::SwallowError(api, api.Event_Destroy(&d));
}

void Event::Await() {
  if (!ev_) return;
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  auto a = TT_ARGS(PJRT_Event_Await_Args);
  a.event = static_cast<PJRT_Event*>(ev_);
  detail::ThrowIfError(api, api.Event_Await(&a), "PJRT_Event_Await");
}

bool Event::IsReady() const {
  if (!ev_) return true;
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  auto a = TT_ARGS(PJRT_Event_IsReady_Args);
  a.event = static_cast<PJRT_Event*>(ev_);
  detail::ThrowIfError(api, api.Event_IsReady(&a), "PJRT_Event_IsReady");
  return a.is_ready;
}

namespace {
struct OnReadyArg {
  const detail::Api* api;
  std::function<void(const std::string&)> done;
};
void CallOnReady(PJRT_Error* error, void* arg) {
  auto* a = static_cast<OnReadyArg*>(arg);
  std::string message;
  if (error) {
    detail::SwallowError(*a->api, error, &message);
    if (message.empty()) message = "unknown PJRT error";
  }
  a->done(message);
  delete a;
}
}  // namespace

void Event::OnReady(std::function<void(const std::string& error)> done) {
  if (!ev_) {
    done("");
    return;
  }
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  if (api.Event_OnReady) {
    auto* arg = new OnReadyArg{&api, std::move(done)};
    auto r = TT_ARGS(PJRT_Event_OnReady_Args);
    r.event = static_cast<PJRT_Event*>(ev_);
    r.callback = &CallOnReady;
    r.user_arg = arg;
    PJRT_Error* err = api.Event_OnReady(&r);
    if (!err) return;
    detail::SwallowError(api, err);
    done = std::move(arg->done);
    delete arg;
  }
  try {
    Await();
  } catch (const Error& e) {
    done(e.what());
    return;
  }
  done("");
}

// ----------------------------------------------------------------- Buffer ---
Buffer::Buffer(void* buf, ElementType t, std::vector<int64_t> dims, int device)
    : buf_(buf), type_(t), dims_(std::move(dims)), device_(device) {
  Runtime::Get().Account(device_, static_cast<int64_t>(nbytes()), 1);
}

Buffer::~Buffer() {
  Runtime& rt = Runtime::Get();
  if (buf_) {
    const auto& api = *static_cast<const detail::Api*>(rt.api_);
    auto d = TT_ARGS(PJRT_Buffer_Destroy_Args);
    d.buffer = static_cast<PJRT_Buffer*>(buf_);
    detail::SwallowError(api, api.Buffer_Destroy(&d));
  }
  if (accounted_) rt.Account(device_, -static_cast<int64_t>(nbytes()), -1);
}

void Buffer::MarkDonated() {
  donated_ = true;
  ExcludeFromAccounting();
}

void Buffer::ExcludeFromAccounting() {
  if (!accounted_) return;
  accounted_ = false;
  Runtime::Get().Account(device_, -static_cast<int64_t>(nbytes()), -1);
}

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

namespace {
// Starts copying `src` (need bytes) into dst; returns the copy's event.
PJRT_Event* start_to_host(const detail::Api& api, void* src, void* dst, size_t need) {
  auto a = TT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  a.src = static_cast<PJRT_Buffer*>(src);
  a.dst = dst;
  a.dst_size = need;
  detail::ThrowIfError(api, api.Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  return a.event;
}
}  // namespace

void Buffer::ToHost(void* dst, size_t dst_bytes) const {
  const size_t need = nbytes();
  if (dst_bytes < need)
    throw Error(3, "Buffer::ToHost: destination has " + std::to_string(dst_bytes) + " bytes, the buffer " +
                       std::to_string(need));
  if (need == 0) {  // nothing to copy; still surface a failed computation
    BlockUntilReady();
    return;
  }
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  detail::AwaitAndDestroyEvent(api, start_to_host(api, buf_, dst, need), "PJRT_Buffer_ToHostBuffer");
}

std::unique_ptr<Event> Buffer::ToHostAsync(void* dst, size_t dst_bytes) const {
  const size_t need = nbytes();
  if (dst_bytes < need)
    throw Error(3, "Buffer::ToHostAsync: destination has " + std::to_string(dst_bytes) + " bytes, the buffer " +
                       std::to_string(need));
  if (need == 0) return ReadyEvent();
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  return std::make_unique<Event>(start_to_host(api, buf_, dst, need));
}

void Buffer::BlockUntilReady() const {
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  auto a = TT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  a.buffer = static_cast<PJRT_Buffer*>(buf_);
  detail::ThrowIfError(api, api.Buffer_ReadyEvent(&a), "PJRT_Buffer_ReadyEvent");
  detail::AwaitAndDestroyEvent(api, a.event, "buffer computation");
}

const void* Buffer::HostAddress() const {
  const Runtime& rt = Runtime::Get();
  const auto& api = *static_cast<const detail::Api*>(rt.api_);
  if (rt.info().platform != "cpu" || !api.Buffer_UnsafePointer || !api.Buffer_OnDeviceSizeInBytes) return nullptr;
  BlockUntilReady();
  // A buffer whose memory is not exactly its dense bytes (padding, another
  // layout) is read through PJRT instead.
  auto size = TT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args);
  size.buffer = static_cast<PJRT_Buffer*>(buf_);
  if (detail::SwallowError(api, api.Buffer_OnDeviceSizeInBytes(&size)) != 0 || size.on_device_size_in_bytes != nbytes())
    return nullptr;
  auto ptr = TT_ARGS(PJRT_Buffer_UnsafePointer_Args);
  ptr.buffer = static_cast<PJRT_Buffer*>(buf_);
  if (detail::SwallowError(api, api.Buffer_UnsafePointer(&ptr)) != 0) return nullptr;
  return reinterpret_cast<const void*>(ptr.buffer_pointer);
}

std::unique_ptr<Event> Buffer::ReadyEvent() const {
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  auto a = TT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  a.buffer = static_cast<PJRT_Buffer*>(buf_);
  detail::ThrowIfError(api, api.Buffer_ReadyEvent(&a), "PJRT_Buffer_ReadyEvent");
  return std::make_unique<Event>(a.event);
}

// ------------------------------------------------------------- Executable ---
Executable::Executable(void* loaded, int num_outputs) : loaded_(loaded), num_outputs_(num_outputs) {}

Executable::~Executable() {
  if (!loaded_) return;
  const auto& api = *static_cast<const detail::Api*>(Runtime::Get().api_);
  auto d = TT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  d.executable = static_cast<PJRT_LoadedExecutable*>(loaded_);
  detail::SwallowError(api, api.LoadedExecutable_Destroy(&d));
}

std::vector<BufferPtr> Executable::Execute(const std::vector<Buffer*>& args, int device,
                                           const std::vector<int64_t>& non_donatable) const {
  Runtime& rt = Runtime::Get();
  const auto& api = *static_cast<const detail::Api*>(rt.api_);
  rt.CheckDevice(device);
  if (out_types_.size() != static_cast<size_t>(num_outputs_) || out_dims_.size() != out_types_.size())
    throw Error(9, "Execute: this Executable has no output signature; create executables with "
                   "Runtime::Compile");
  std::vector<PJRT_Buffer*> in(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i] || !args[i]->raw())
      throw Error(3, "Execute: argument " + std::to_string(i) + " is null");
    if (args[i]->device() != device)
      throw Error(3, "Execute: argument " + std::to_string(i) + " is on tpu:" +
                         std::to_string(args[i]->device()) + ", the program runs on tpu:" +
                         std::to_string(device));
    in[i] = static_cast<PJRT_Buffer*>(args[i]->raw());
  }
  int64_t out_bytes = 0;
  for (size_t i = 0; i < out_types_.size(); ++i) {
    int64_t n = static_cast<int64_t>(element_size(out_types_[i]));
    for (int64_t d : out_dims_[i]) n *= d;
    out_bytes += n;
  }
  rt.CheckCapacity(device, out_bytes);

  std::vector<PJRT_Buffer*> out(static_cast<size_t>(num_outputs_), nullptr);
  PJRT_Buffer* const* arg_list = in.data();
  PJRT_Buffer** out_list = out.data();
  auto opts = TT_ARGS(PJRT_ExecuteOptions);
  opts.non_donatable_input_indices = non_donatable.empty() ? nullptr : non_donatable.data();
  opts.num_non_donatable_input_indices = non_donatable.size();
  auto a = TT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  a.executable = static_cast<PJRT_LoadedExecutable*>(loaded_);
  a.options = &opts;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = in.size();
  a.output_lists = &out_list;
  a.device_complete_events = nullptr;
  a.execute_device = static_cast<PJRT_Device*>(rt.devices_[device]);
  detail::ThrowIfError(api, api.LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");

  std::vector<BufferPtr> result;
  result.reserve(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    // Wrap every output first so that none leaks if one wrap throws.
    result.push_back(std::make_shared<Buffer>(out[i], out_types_[i], out_dims_[i], device));
  }
  return result;
}

}  // namespace tt::runtime
