// Data-dependent checks computed on the device, as CUDA's device-side
// asserts but raising PyTorch's own exception. A CPU kernel raises for bad
// data (an index out of range); a program cannot, so a rule records a check
// (Context::checks): a 0-d `bad` flag and the offending value, computed with
// its results. The program returns all of its checks as one extra s64[2n]
// result (bad, value pairs), which the backend reads the next time the host
// waits, raising the first failed check there (at once under
// TORCH_TPU_LAUNCH_BLOCKING=1). TORCH_TPU_DEVICE_CHECKS=0 turns them off.
#pragma once

#include <string>
#include <vector>

#include "lowering/rule.h"

namespace tt::lowering {

// TORCH_TPU_DEVICE_CHECKS, read once (default on).
bool device_checks_enabled();

// Records a check (nothing when checks are off). `message` names the bad
// datum with "{}" for `value`; the op's name is prefixed by the backend.
void add_check(Builder& b, const Context& c, Value bad, Value value, CheckError error, std::string message);

// Records that no element of `bad` (a mask shaped like `values`) is set;
// the value reported is the largest of `values` where it is.
void check_each(Builder& b, const Context& c, Value bad, Value values, CheckError error, std::string message);

// Records that no element of the 1-D mask `bad` is set; the value reported
// is `values` at the first set position, as a CPU kernel that walks its
// input in order reports it. A message that also names that position uses
// "{pos}" for it: position and value then travel packed in the one s64
// (position * 2^32 + the value clamped to 32 bits).
void check_first(Builder& b, const Context& c, Value bad, Value values, CheckError error, std::string message);

// Records that every element of the integer `index` lies in [lo, hi): [0, n)
// for ops that take no negative index, [-n, n) for those that count from the
// end. `message` may use "{}" for the offending index.
void check_index_range(Builder& b, const Context& c, Value index, int64_t lo, int64_t hi, CheckError error,
                       std::string message);

// Records that no element of an integer divisor is zero: the CPU's integer
// division, floor division, remainder and fmod raise
// RuntimeError("ZeroDivisionError"). Nothing for float divisors.
void check_nonzero_divisor(Builder& b, const Context& c, Value divisor);

// The checks' (bad, value) pairs as one s64[2n] value.
Value pack_checks(Builder& b, const std::vector<DeviceCheck>& checks);

// `info`'s message with "{}" replaced by `value` (and "{pos}" by the
// position packed with it, see check_first).
std::string check_message(const CheckInfo& info, int64_t value);

}  // namespace tt::lowering
