#include "backend/device/generator.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/Utils.h>
#include <c10/core/TensorImpl.h>
#include <ATen/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>

#include "backend/device/tpu_device.h"

namespace tt::backend {

// The default seed matches PyTorch's default_rng_seed_val (67280421310721).
TpuGenerator::TpuGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(67280421310721ULL) {}

void TpuGenerator::set_current_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
void TpuGenerator::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t TpuGenerator::get_offset() const { return offset_; }
uint64_t TpuGenerator::current_seed() const { return seed_; }

uint64_t TpuGenerator::seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) | rd();
  set_current_seed(s);
  return s;
}

uint64_t TpuGenerator::reserve(uint64_t counters) {
  uint64_t o = offset_;
  offset_ += counters;
  return o;
}

// State: 16 bytes, seed then offset (little-endian uint64), as a CPU uint8 tensor.
c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<uint8_t*>(state.data_ptr()) + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK_TYPE(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                   "RNG state must be a torch.ByteTensor");
  TORCH_CHECK(new_state.numel() == 16, "tpu RNG state must have 16 bytes, got ", new_state.numel());
  const auto* p = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

namespace {
std::mutex g_gens_mu;
std::deque<at::Generator> g_gens;  // deque: references stay valid
// Seeds given before the device started, by device (-1: every device).
std::map<int, uint64_t> g_queued_seeds;
}  // namespace

void queue_seed(int device, uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_gens_mu);
  if (device < 0) g_queued_seeds.clear();
  g_queued_seeds[device] = seed;
}

const at::Generator& default_generator(int device) {
  std::lock_guard<std::mutex> lock(g_gens_mu);
  int n = std::max(device_count_or_zero(), device + 1);
  while (static_cast<int>(g_gens.size()) < n) {
    const int d = static_cast<int>(g_gens.size());
    g_gens.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(d)));
    auto queued = g_queued_seeds.find(d);
    if (queued == g_queued_seeds.end()) queued = g_queued_seeds.find(-1);
    if (queued != g_queued_seeds.end()) g_gens.back().get<TpuGenerator>()->set_current_seed(queued->second);
  }
  return g_gens[device];
}

TpuGenerator* generator_or_default(const std::optional<at::Generator>& gen, int device) {
  const at::Generator& g = gen.has_value() && gen->defined() ? *gen : default_generator(device);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'tpu' device type for generator but found '", g.device().type(), "'");
  return at::check_generator<TpuGenerator>(g);
}

}  // namespace tt::backend
