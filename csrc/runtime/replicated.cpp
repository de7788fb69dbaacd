// torch_tpu runtime: programs of N replicas, one per device, compiled with a
// device assignment and run by one PJRT_LoadedExecutable_Execute over all N
// devices (so their collectives run inside XLA).
#include <set>
#include <string>
#include <vector>

#include "runtime/pjrt_internal.h"
#include "runtime/runtime.h"

namespace tt::runtime {
namespace {

void Varint(std::string& s, uint64_t v) {
  while (v >= 0x80) { s.push_back(static_cast<char>((v & 0x7f) | 0x80)); v >>= 7; }
  s.push_back(static_cast<char>(v));
}
void Tag(std::string& s, int field, int wire) { Varint(s, (static_cast<uint64_t>(field) << 3) | wire); }
void Bytes(std::string& s, int field, const std::string& b) { Tag(s, field, 2); Varint(s, b.size()); s += b; }

// Serialized xla.CompileOptionsProto:
//   executable_build_options (3) { device_ordinal (1) = -1, num_replicas (4) = N,
//     num_partitions (5) = 1,
//     device_assignment (9) { replica_count (1) = N, computation_count (2) = 1,
//       computation_devices (3) { replica_device_ids (1, packed) = ids } } }
std::string ReplicatedCompileOptions(const std::vector<int64_t>& device_ids) {
  std::string ids;
  for (int64_t id : device_ids) Varint(ids, static_cast<uint64_t>(id));
  std::string computation;
  Bytes(computation, 1, ids);
  std::string assignment;
  Tag(assignment, 1, 0); Varint(assignment, device_ids.size());
  Tag(assignment, 2, 0); Varint(assignment, 1);
  Bytes(assignment, 3, computation);
  std::string build;
  Tag(build, 1, 0); Varint(build, static_cast<uint64_t>(int64_t{-1}));
  Tag(build, 4, 0); Varint(build, device_ids.size());
  Tag(build, 5, 0); Varint(build, 1);
  Bytes(build, 9, assignment);
  std::string opts;
  Bytes(opts, 3, build);
  return opts;
}

}  // namespace

ExecutablePtr Runtime::CompileReplicated(const std::string& mlir_text, const std::vector<int>& devices) {
  const auto& api = *static_cast<const detail::Api*>(api_);
  if (devices.empty()) throw Error(3, "CompileReplicated: no devices");
  std::set<int> distinct;
  std::vector<int64_t> ids;
  for (int d : devices) {
    CheckDevice(d);
    if (!distinct.insert(d).second)
      throw Error(3, "CompileReplicated: tpu:" + std::to_string(d) + " appears twice; each replica needs its own device");
    auto gd = TT_ARGS(PJRT_Device_GetDescription_Args);
    gd.device = static_cast<PJRT_Device*>(devices_[d]);
    detail::ThrowIfError(api, api.Device_GetDescription(&gd), "PJRT_Device_GetDescription");
    auto id = TT_ARGS(PJRT_DeviceDescription_Id_Args);
    id.device_description = gd.device_description;
    detail::ThrowIfError(api, api.DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
    ids.push_back(id.id);
  }
  const std::string opts = ReplicatedCompileOptions(ids);
  PJRT_LoadedExecutable* loaded = detail::CompileMlir(api, static_cast<PJRT_Client*>(client_), mlir_text, opts);
  ExecutablePtr exe = WrapLoaded(loaded, /*from_disk=*/false, nullptr);
  exe->replica_devices_ = devices;
  return exe;
}

std::vector<std::vector<BufferPtr>> Executable::ExecuteReplicated(
    const std::vector<std::vector<Buffer*>>& args) const {
  Runtime& rt = Runtime::Get();
  const auto& api = *static_cast<const detail::Api*>(rt.api_);
  const size_t n = replica_devices_.size();
  if (n == 0) throw Error(9, "ExecuteReplicated: this Executable was not compiled by Runtime::CompileReplicated");
  if (args.size() != n)
    throw Error(3, "ExecuteReplicated: " + std::to_string(args.size()) + " argument lists for " +
                       std::to_string(n) + " replicas");
  std::vector<std::vector<PJRT_Buffer*>> in(n);
  std::vector<PJRT_Buffer* const*> arg_lists(n);
  for (size_t r = 0; r < n; ++r) {
    if (args[r].size() != args[0].size())
      throw Error(3, "ExecuteReplicated: replicas have different argument counts");
    for (size_t i = 0; i < args[r].size(); ++i) {
      Buffer* b = args[r][i];
      if (!b || !b->raw()) throw Error(3, "ExecuteReplicated: replica " + std::to_string(r) + " argument " +
                                              std::to_string(i) + " is null");
      if (b->device() != replica_devices_[r])
        throw Error(3, "ExecuteReplicated: replica " + std::to_string(r) + " argument " + std::to_string(i) +
                           " is on tpu:" + std::to_string(b->device()) + ", the replica runs on tpu:" +
                           std::to_string(replica_devices_[r]));
      in[r].push_back(static_cast<PJRT_Buffer*>(b->raw()));
    }
    arg_lists[r] = in[r].data();
  }
  int64_t out_bytes = 0;
  for (size_t i = 0; i < out_types_.size(); ++i) {
    int64_t b = static_cast<int64_t>(element_size(out_types_[i]));
    for (int64_t d : out_dims_[i]) b *= d;
    out_bytes += b;
  }
  for (int d : replica_devices_) rt.CheckCapacity(d, out_bytes);

  std::vector<std::vector<PJRT_Buffer*>> out(n, std::vector<PJRT_Buffer*>(num_outputs_, nullptr));
  std::vector<PJRT_Buffer**> out_lists(n);
  for (size_t r = 0; r < n; ++r) out_lists[r] = out[r].data();
  auto opts = TT_ARGS(PJRT_ExecuteOptions);
  auto a = TT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  a.executable = static_cast<PJRT_LoadedExecutable*>(loaded_);
  a.options = &opts;
  a.argument_lists = arg_lists.data();
  a.num_devices = n;
  a.num_args = args[0].size();
  a.output_lists = out_lists.data();
  a.device_complete_events = nullptr;
  a.execute_device = nullptr;  // the device assignment places the replicas
  detail::ThrowIfError(api, api.LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");

  std::vector<std::vector<BufferPtr>> result(n);
  for (size_t r = 0; r < n; ++r)
    for (int i = 0; i < num_outputs_; ++i)
      result[r].push_back(std::make_shared<Buffer>(out[r][i], out_types_[i], out_dims_[i], replica_devices_[r]));
  return result;
}

}  // namespace tt::runtime
