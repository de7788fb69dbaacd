#include "lowering/device_check.h"

#include <cstdlib>
#include <limits>
#include <numeric>

#include "lowering/helpers.h"
#include "settings/settings.h"

namespace tt::lowering {

bool device_checks_enabled() {
  static const bool on = [] {
    return settings::Bool(settings::Id::TORCH_TPU_DEVICE_CHECKS);
  }();
  return on;
}

void add_check(Builder& b, const Context& c, Value bad, Value value, CheckError error, std::string message) {
  if (!c.checks) return;
  DeviceCheck check;
  check.info.error = error;
  check.info.message = std::move(message);
  check.bad = b.reshape(b.convert(bad, DType::Pred), {});
  check.value = b.reshape(b.convert(value, DType::S64), {});
  c.checks->push_back(std::move(check));
}

void check_each(Builder& b, const Context& c, Value bad, Value values, CheckError error, std::string message) {
  if (!c.checks || values.type.numel() == 0) return;
  Value v = b.convert(values, DType::S64);
  const Shape& s = v.shape();
  std::vector<int64_t> dims(static_cast<size_t>(v.rank()));
  std::iota(dims.begin(), dims.end(), 0);
  // The largest offending value (the lowest, when that is the only kind).
  Value lowest = b.constant_int(std::numeric_limits<int64_t>::min(), DType::S64, s);
  Value worst = reduce_max(b, b.select(bad, v, lowest), dims);
  Value any = reduce_max(b, b.convert(bad, DType::S32), dims);
  add_check(b, c, any, worst, error, std::move(message));
}

void check_first(Builder& b, const Context& c, Value bad, Value values, CheckError error, std::string message) {
  int64_t n = values.type.numel();
  if (!c.checks || n == 0) return;
  Shape s{n};
  Value v = b.reshape(b.convert(values, DType::S64), s);
  Value hit = b.reshape(b.convert(bad, DType::Pred), s);
  Value pos = b.iota(hlo::Type{DType::S64, s}, 0);
  Value first = reduce_min(b, b.select(hit, pos, b.constant_int(n, DType::S64, s)), {0});
  Value at_first = b.compare(pos, b.broadcast_in_dim(first, s, {}), hlo::Cmp::EQ);
  Value lowest = b.constant_int(std::numeric_limits<int64_t>::min(), DType::S64, s);
  Value value = reduce_max(b, b.select(at_first, v, lowest), {0});
  Value any = reduce_max(b, b.convert(hit, DType::S32), {0});
  if (message.find("{pos}") != std::string::npos) {
    // position * 2^32 + the value's low 32 bits (clamped to int32 first).
    Value v32 = b.clamp(b.constant_int(std::numeric_limits<int32_t>::min(), DType::S64), value,
                        b.constant_int(std::numeric_limits<int32_t>::max(), DType::S64));
    Value low = b.select(b.compare(v32, b.constant_int(0, DType::S64), hlo::Cmp::LT),
                         b.add(v32, b.constant_int(int64_t{1} << 32, DType::S64)), v32);
    value = b.add(b.mul(first, b.constant_int(int64_t{1} << 32, DType::S64)), low);
  }
  add_check(b, c, any, value, error, std::move(message));
}

void check_index_range(Builder& b, const Context& c, Value index, int64_t lo, int64_t hi, CheckError error,
                       std::string message) {
  if (!c.checks || index.type.numel() == 0) return;
  Value i = b.convert(index, DType::S64);
  const Shape& s = i.shape();
  Value out = b.or_(b.compare(i, b.constant_int(lo, DType::S64, s), hlo::Cmp::LT),
                    b.compare(i, b.constant_int(hi, DType::S64, s), hlo::Cmp::GE));
  check_each(b, c, out, i, error, std::move(message));
}

void check_nonzero_divisor(Builder& b, const Context& c, Value divisor) {
  if (!hlo::is_int(divisor.dtype())) return;
  Value zero = b.constant_int(0, divisor.dtype(), divisor.shape());
  check_each(b, c, b.compare(divisor, zero, hlo::Cmp::EQ), zero, CheckError::Runtime, "ZeroDivisionError");
}

Value pack_checks(Builder& b, const std::vector<DeviceCheck>& checks) {
  Values parts;
  for (const auto& k : checks) {
    parts.push_back(b.reshape(b.convert(k.bad, DType::S64), {1}));
    parts.push_back(b.reshape(k.value, {1}));
  }
  return b.concatenate(parts, 0);
}

std::string check_message(const CheckInfo& info, int64_t value) {
  std::string m = info.message;
  size_t pos_at = m.find("{pos}");
  if (pos_at != std::string::npos) {
    m.replace(pos_at, 5, std::to_string(value >> 32));
    int64_t low = value & 0xffffffffLL;
    value = low >= (int64_t{1} << 31) ? low - (int64_t{1} << 32) : low;
  }
  size_t at = m.find("{}");
  if (at != std::string::npos) m.replace(at, 2, std::to_string(value));
  return m;
}

}  // namespace tt::lowering
