// c10's DeviceGuardImplInterface for tpu: the current device, streams and
// events (backend/device/stream_events.h: a stream orders completion only; waiting on
// an event never syncs the whole device). PyTorch's torch.Stream and
// torch.Event, and torch.tpu's, call these.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

#include "backend/device/stream_events.h"
#include "backend/device/tpu_device.h"

namespace tt::backend {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

// What a c10::Event's `void*` points at: its device, and the Completion of
// its last record (replaced by each record; waits keep the old one). Every
// Completion carries its time, so the timing flag changes nothing here
// (c10::Event checks it for elapsed_time).
struct TpuEvent {
  c10::DeviceIndex device;
  streams::CompletionPtr completion;
};

struct TpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static c10::DeviceIndex index_of(c10::Device d) {
    return d.has_index() ? d.index() : static_cast<c10::DeviceIndex>(current_device());
  }
  static c10::Stream make_stream(c10::DeviceIndex d, int64_t id) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, d), id);
  }

  c10::DeviceType type() const override { return kTpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kTpu, current_device()); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) {
      try { set_current_device(d.index()); } catch (...) {}
    }
  }

  // ---- streams
  c10::Stream getStream(c10::Device d) const override {
    auto i = index_of(d);
    return make_stream(i, streams::current(i));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return make_stream(index_of(d), 0); }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    auto i = index_of(d);
    return make_stream(i, streams::create(i, priority));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  // Does not change the current device (the interface's contract).
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto i = index_of(s.device());
    return make_stream(i, streams::exchange(i, s.id()));
  }
  bool queryStream(const c10::Stream& s) const override {
    return streams::mark(s.device_index(), s.id())->query();
  }
  void synchronizeStream(const c10::Stream& s) const override {
    streams::mark(s.device_index(), s.id())->wait();
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override { synchronize(d); }
  // PJRT keeps a buffer alive while a program that reads it is pending, so
  // there is no allocator to tell.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}

  // ---- events
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex device,
              const c10::EventFlag) const override {
    TORCH_CHECK(device == -1 || device == s.device_index(), "Event device ", static_cast<int>(device),
                " does not match recording stream's device ", static_cast<int>(s.device_index()), ".");
    auto* e = static_cast<TpuEvent*>(*event);
    if (!e) {
      e = new TpuEvent{s.device_index(), nullptr};
      *event = e;
    }
    e->completion = streams::mark(s.device_index(), s.id());
  }
  void block(void* event, const c10::Stream& s) const override {
    auto* e = static_cast<TpuEvent*>(event);
    if (!e || !e->completion) return;
    streams::wait_for(s.device_index(), s.id(), e->completion);
  }
  bool queryEvent(void* event) const override {
    auto* e = static_cast<TpuEvent*>(event);
    return !e || !e->completion || e->completion->query();
  }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<TpuEvent*>(event);
    if (e && e->completion) e->completion->wait();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  // Milliseconds from the completion of the first event's work to the
  // second's, as the host observed them (PJRT reports completion, not device
  // timestamps). Both events are complete (c10::Event checked that).
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<TpuEvent*>(start);
    auto* b = static_cast<TpuEvent*>(end);
    TORCH_CHECK(a && b && a->completion && b->completion,
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a->device == b->device, "elapsed_time: the events were recorded on different devices (tpu:",
                static_cast<int>(a->device), " and tpu:", static_cast<int>(b->device), ")");
    auto t0 = a->completion->done_at();
    auto t1 = b->completion->done_at();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }
#if __has_include(<c10/core/DeviceCapability.h>)
  // The dtypes a tpu storage can hold (to_element_type in device_storage.cpp).
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability cap;
    cap.capability_data.capability_bits = 0;
    auto& t = cap.capability_data.supported_scalar_types;
    t.has_Float = t.has_BFloat16 = t.has_Half = t.has_Double = 1;
    t.has_Char = t.has_Short = t.has_Int = t.has_Long = t.has_Byte = t.has_Bool = 1;
    t.has_Float8_e5m2 = t.has_Float8_e4m3fn = 1;
    t.has_ComplexFloat = t.has_ComplexDouble = 1;
    return cap;
  }
#endif
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace
}  // namespace tt::backend
