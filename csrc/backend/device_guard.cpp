// c10's DeviceGuardImplInterface for tpu: the current device and streams.
// PJRT orders work on a device by data dependencies, so there is one stream
// per device and events are satisfied by synchronizing.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "backend/tpu_device.h"

namespace tt::backend {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

struct TpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
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
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream& s) const override { synchronize(s.device_index()); }
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override { synchronize(s.device_index()); }
  void synchronizeDevice(const c10::DeviceIndex d) const override { synchronize(d); }
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
