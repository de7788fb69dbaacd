#include "backend/device/device_storage.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "backend/device/oom_count.h"
#include "backend/device/tpu_device.h"
#include "lowering/view.h"
#include "runtime/host_heap.h"
#include "runtime/runtime.h"

namespace tt::backend {

namespace {
constexpr int kMaxCountedDevices = 64;
std::array<std::atomic<int64_t>, kMaxCountedDevices> g_out_of_memory{};
}  // namespace

void note_out_of_memory(int device) {
  if (device >= 0 && device < kMaxCountedDevices) ++g_out_of_memory[device];
}

int64_t out_of_memory_count(int device) {
  return device >= 0 && device < kMaxCountedDevices ? g_out_of_memory[device].load() : 0;
}

runtime::ElementType to_element_type(at::ScalarType t) {
  using E = runtime::ElementType;
  switch (t) {
    case at::kFloat: return E::F32;
    case at::kBFloat16: return E::BF16;
    case at::kHalf: return E::F16;
    case at::kDouble: return E::F64;
    case at::kChar: return E::S8;
    case at::kShort: return E::S16;
    case at::kInt: return E::S32;
    case at::kLong: return E::S64;
    case at::kByte: return E::U8;
    case at::kBool: return E::Pred;
    case at::kUInt16: return E::U16;
    case at::kUInt32: return E::U32;
    case at::kUInt64: return E::U64;
    case at::kFloat8_e5m2: return E::F8E5M2;
    case at::kFloat8_e4m3fn: return E::F8E4M3FN;
    case at::kComplexFloat: return E::C64;
    case at::kComplexDouble: return E::C128;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t,
                       " yet; supported: float32, bfloat16, float16, float64, int8, int16, int32, "
                       "int64, uint8, bool, float8_e5m2, float8_e4m3fn, complex64, complex128");
  }
}

at::ScalarType to_scalar_type(runtime::ElementType t) {
  using E = runtime::ElementType;
  switch (t) {
    case E::F32: return at::kFloat;
    case E::BF16: return at::kBFloat16;
    case E::F16: return at::kHalf;
    case E::F64: return at::kDouble;
    case E::S8: return at::kChar;
    case E::S16: return at::kShort;
    case E::S32: return at::kInt;
    case E::S64: return at::kLong;
    case E::U8: return at::kByte;
    case E::Pred: return at::kBool;
    case E::U16: return at::kUInt16;
    case E::U32: return at::kUInt32;
    case E::U64: return at::kUInt64;
    case E::F8E5M2: return at::kFloat8_e5m2;
    case E::F8E4M3FN: return at::kFloat8_e4m3fn;
    case E::C64: return at::kComplexFloat;
    case E::C128: return at::kComplexDouble;
    default: TORCH_CHECK(false, "unexpected PJRT element type ", static_cast<int>(t));
  }
}

bool is_supported_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kBFloat16: case at::kHalf: case at::kDouble: case at::kChar:
    case at::kShort: case at::kInt: case at::kLong: case at::kByte: case at::kBool:
    case at::kFloat8_e5m2: case at::kFloat8_e4m3fn: case at::kComplexFloat: case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}


DeviceStorage* storage_of(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_privateuseone(), "expected a tpu tensor, got ", t.device());
  void* p = t.storage().data_ptr().get_context();
  TORCH_CHECK(p != nullptr, "tpu tensor has no storage");
  return static_cast<DeviceStorage*>(p);
}

at::Tensor empty_tpu(at::IntArrayRef sizes, at::ScalarType dtype, int device) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  return at::detail::empty_generic(sizes, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype, std::nullopt);
}

bool covers_own_storage(const at::Tensor& t) {
  lowering::View v{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
  return lowering::covers_storage(v, static_cast<int64_t>(storage_of(t)->nbytes / t.element_size()));
}

}  // namespace tt::backend
