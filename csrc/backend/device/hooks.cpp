// PrivateUse1HooksInterface: what ATen asks of a device backend (availability,
// default generators, which device a pointer belongs to).
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "backend/device/device_storage.h"
#include "backend/device/generator.h"
#include "backend/device/pinned_memory.h"
#include "backend/device/tpu_device.h"

namespace tt::backend {
namespace {

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count_or_zero() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device < 0 ? current_device() : device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<TpuGenerator>(device < 0 ? current_device() : device);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<DeviceStorage*>(data)->device);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_host_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count_or_zero(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    int old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_storage_bytes(storage, nbytes);
  }
};

struct Register {
  Register() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} g_register;

}  // namespace
}  // namespace tt::backend
