// The tpu random generator: a (seed, offset) pair for a counter-based
// generator evaluated on the device. Every random op reads the pair and
// advances the offset by the number of counters it used, so the same seed
// gives the same numbers on any plugin.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace tt::backend {

struct TpuGenerator final : c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex device);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // Returns the offset to use for this op and advances it by `counters`.
  uint64_t reserve(uint64_t counters);

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(int device);
// Seeds device `device` (-1: every device) when its default generator is
// created: torch.manual_seed before the device started must not start it
// (a DataLoader worker seeds torch but may not use the device).
void queue_seed(int device, uint64_t seed);
// The generator an op should use: `gen` when given, else the default.
TpuGenerator* generator_or_default(const std::optional<at::Generator>& gen, int device);

}  // namespace tt::backend
