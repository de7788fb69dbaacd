// What one ATen call looks like to the executor: the program cache key, the
// tpu storages it reads (with their current contents), its scalars, and one
// record per argument from which a rule's Args are rebuilt inside a program.
// Shared by op-by-op eager (one call, one program) and fused eager (a
// cluster of calls, one program).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/device/device_storage.h"
#include "lowering/rule.h"
#include "lowering/view.h"

namespace tt::backend {

struct StorageUse {
  DeviceStorage* storage;
  // The storage's contents as the call reads them: a buffer, or (fused
  // eager) a value that the pending cluster will produce.
  runtime::BufferPtr buffer;
  std::shared_ptr<PendingValue> pending;
  hlo::Type type;  // of the buffer or pending value
};

struct ScalarUse {
  runtime::ElementType type;
  uint64_t bits;  // the value's bytes (double, int64 or bool), zero-extended
  uint64_t bits_hi = 0;  // a complex128's imaginary part (its bytes 8..15)
};

// What the program needs to know about one argument (or list element): the
// host fields, and where a tensor's value comes from.
struct ArgRecord : lowering::HostArg {
  int storage = -1;  // Tensor on tpu: index into CallState::storages
  int scalar = -1;   // Scalar or CPU 0-d tensor: index into CallState::scalars
  lowering::View view;
  hlo::DType dtype = hlo::DType::F32;
  std::vector<ArgRecord> elems;  // TensorList / Tensor?[]
};

struct CallState {
  std::vector<StorageUse> storages;
  std::vector<ScalarUse> scalars;
  std::vector<ArgRecord> records;
  int device = -1;
  std::optional<at::Generator> generator;
};

// The host fields of an argument that is not a tensor or tensor list,
// classified by its value and its schema slot (a number in a Scalar slot is
// a Scalar): the one classification that eager calls and graph nodes share.
// Generators and devices are None here (eager reads them from the IValue).
// Returns false for a tensor or a list of tensors, whose value comes from a
// storage or a graph value.
bool classify_host_arg(const c10::IValue& v, bool scalar_slot, lowering::HostArg& h);
bool is_scalar_schema_type(const c10::TypePtr& t);  // Scalar or Scalar?
bool is_tensor_schema_type(const c10::TypePtr& t);  // Tensor or Tensor?

// Appends the key of `args` (matching `schema`) to `key` and fills `st`.
// With `defer`, a storage whose contents are pending in the fused cluster is
// referenced as such instead of being materialized (which would run it).
void encode_call(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, bool static_scalars,
                 bool defer, CallState& st, std::string& key);

// A device buffer holding the scalar (cached: one upload of 0.5 serves
// every later call that passes 0.5).
runtime::BufferPtr scalar_buffer(const ScalarUse& s, int device);

// "f32[2, 3], i64[4]": the tensor arguments, for error messages.
std::string describe_args(const CallState& st);

}  // namespace tt::backend
