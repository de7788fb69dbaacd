#include "backend/fused_cluster.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "backend/storage_contents.h"
#include "backend/pending_work.h"
#include "backend/program_runner.h"
#include "backend/tpu_device.h"

namespace tt::backend::fused {
namespace {

// A value inside the cluster: a program input (a storage's buffer, a
// scalar, an RNG word) or a result of a recorded call.
struct Slot {
  hlo::Type type;
  int input = -1;                       // index into Cluster::inputs
  std::weak_ptr<PendingValue> pending;  // a result; live while a storage holds it
};

struct ClusterOp {
  const OpPlan* plan = nullptr;
  std::shared_ptr<OpMeta> meta;
  std::vector<ArgRecord> records;
  std::vector<int> storages;  // per CallState storage: its slot
  std::vector<int> scalars;   // per CallState scalar: its slot
  int seed = -1, offset = -1;
  std::vector<int> results;   // slots
  lowering::MatmulPrecision precision = lowering::MatmulPrecision::Highest;
};

struct Cluster {
  uint64_t generation = 1;
  int device = -1;
  std::vector<Slot> slots;
  std::vector<runtime::BufferPtr> inputs;
  std::unordered_map<const DeviceStorage*, int> storage_slot;  // a storage's buffer, once an input
  std::vector<ClusterOp> ops;
  std::string key;  // the op sequence, shapes and wiring
};

// Recursive: a flush may be asked for while one is being recorded (never
// re-entering the same cluster: the cluster is detached before it runs).
std::recursive_mutex g_mu;
Cluster g_cluster;
Stats g_stats;

bool g_fused = [] {
  const char* v = getenv("TORCH_TPU_EAGER_MODE");
  return v && std::string(v) == "fused";
}();

size_t max_ops() {
  static size_t n = [] {
    const char* v = getenv("TORCH_TPU_FUSED_MAX_OPS");
    long x = v ? std::atol(v) : 0;
    return x > 0 ? static_cast<size_t>(x) : size_t{512};
  }();
  return n;
}

void key_int(std::string& key, int64_t v) {
  key += std::to_string(v);
  key.push_back(',');
}

int add_input(Cluster& c, runtime::BufferPtr buffer, const hlo::Type& type) {
  Slot s;
  s.type = type;
  s.input = static_cast<int>(c.inputs.size());
  c.inputs.push_back(std::move(buffer));
  c.slots.push_back(std::move(s));
  return static_cast<int>(c.slots.size()) - 1;
}

std::shared_ptr<PendingValue> add_result(Cluster& c, const hlo::Type& type, const std::string& producer) {
  auto pv = std::make_shared<PendingValue>();
  pv->type = type;
  pv->device = c.device;
  pv->cluster = c.generation;
  pv->id = static_cast<int>(c.slots.size());
  pv->producer = producer;
  Slot s;
  s.type = type;
  s.pending = pv;
  c.slots.push_back(std::move(s));
  return pv;
}

// "a fused eager cluster of 3 ops (aten::mul.Tensor(f32[4]), ...)", for messages.
std::string describe(const Cluster& c) {
  std::string s;
  size_t n = 0;
  for (const auto& op : c.ops) {
    if (n++ == 8) {
      s += ", ... (" + std::to_string(c.ops.size()) + " ops)";
      break;
    }
    s += (s.empty() ? "" : ", ") + op.meta->producer;
  }
  return "a fused eager cluster of " + std::to_string(c.ops.size()) + " ops (" + s + ")";
}

runtime::ExecutablePtr compile(const Cluster& c, const std::vector<int>& outs) {
  hlo::Builder b;
  std::vector<hlo::Value> vals(c.slots.size());
  for (size_t i = 0; i < c.slots.size(); ++i)
    if (c.slots[i].input >= 0) vals[i] = b.param(c.slots[i].type);
  for (const auto& op : c.ops) {
    ProgramInputs in;
    for (int s : op.storages) in.storages.push_back(vals[s]);
    for (int s : op.scalars) in.scalars.push_back(vals[s]);
    if (op.seed >= 0) {
      in.seed = vals[op.seed];
      in.offset = vals[op.offset];
    }
    lowering::set_matmul_precision(op.precision);
    hlo::Values r = emit_op(b, in, *op.plan, *op.meta, op.records);
    TORCH_CHECK(r.size() == op.results.size(), "tpu fused eager: ", op.meta->producer, " gave ", r.size(),
                " results, ", op.results.size(), " recorded");
    for (size_t k = 0; k < r.size(); ++k) vals[op.results[k]] = r[k];
  }
  hlo::Values results;
  for (int id : outs) results.push_back(vals[id]);
  b.set_results(results);
  return compile_program(b.module_text(), ProgramMode::Fused, describe(c),
                         " (run with TORCH_TPU_EAGER_MODE=strict or TORCH_TPU_LAUNCH_BLOCKING=1 to find the op)");
}

// Runs a detached cluster and hands each live result its buffer.
void run(Cluster& c, const char* reason) {
  std::vector<int> outs;
  std::vector<std::shared_ptr<PendingValue>> live;
  for (size_t i = 0; i < c.slots.size(); ++i) {
    if (c.slots[i].input >= 0) continue;
    if (auto pv = c.slots[i].pending.lock()) {
      outs.push_back(static_cast<int>(i));
      live.push_back(std::move(pv));
    }
  }
  g_stats.clusters += 1;
  g_stats.flush_reasons[reason] += 1;
  if (outs.empty()) {  // every result died unobserved: nothing to compute
    g_stats.empty += 1;
    return;
  }
  std::string key = std::move(c.key);
  key += '#';
  for (int id : outs) key_int(key, id);
  try {
    std::shared_ptr<CachedProgram> prog = find_program(key, ProgramMode::Fused);
    if (!prog) {
      prog = std::make_shared<CachedProgram>();
      prog->exe = compile(c, outs);
      store_program(key, ProgramMode::Fused, prog);
    }
    ProgramArgs inputs;
    for (const auto& b : c.inputs) inputs.add(b.get());
    std::vector<runtime::BufferPtr> bufs = run_program(*prog->exe, inputs, c.device, describe(c));
    for (size_t i = 0; i < live.size(); ++i) live[i]->result = bufs.at(i);
  } catch (const std::exception& e) {
    for (auto& pv : live) pv->error = e.what();
    throw;
  }
}

void flush_locked(const char* reason) {
  if (g_cluster.ops.empty()) return;
  Cluster c = std::move(g_cluster);
  g_cluster = Cluster{};
  g_cluster.generation = c.generation + 1;
  run(c, reason);
}

}  // namespace

void set_mode(const std::string& m) {
  TORCH_CHECK(m == "strict" || m == "fused", "torch_tpu.set_eager_mode: expected 'strict' or 'fused', got '", m, "'");
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  flush_locked("mode");
  g_fused = m == "fused";
}

std::string mode() { return g_fused ? "fused" : "strict"; }
bool recording() { return g_fused && !launch_blocking(); }

uint64_t generation() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_cluster.generation;
}

void record(const OpPlan& plan, torch::jit::Stack* stack, size_t num_args, CallState& st, const std::string& key,
            std::shared_ptr<OpMeta> meta, lowering::MatmulPrecision precision) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (g_cluster.device >= 0 && g_cluster.device != st.device) flush_locked("device");
  Cluster& c = g_cluster;
  c.device = st.device;
  ClusterOp op;
  op.plan = &plan;
  op.precision = precision;
  c.key += key;
  c.key += '<';
  for (auto& u : st.storages) {
    int slot;
    if (u.pending && u.pending->cluster == c.generation && !u.pending->result) {
      slot = u.pending->id;
    } else {
      // A buffer, or the result of a cluster that already ran.
      runtime::BufferPtr buf = u.buffer ? u.buffer : storage_buffer(u.storage, aten_dtype(u.type.dtype));
      auto it = c.storage_slot.find(u.storage);
      if (it != c.storage_slot.end() && c.inputs[c.slots[it->second].input] == buf) {
        slot = it->second;
      } else {
        slot = add_input(c, buf, u.type);
        c.storage_slot[u.storage] = slot;
      }
    }
    op.storages.push_back(slot);
    key_int(c.key, slot);
  }
  // Every scalar is its own input, so a changing value never changes the
  // cluster (a learning rate schedule does not recompile).
  for (const auto& s : st.scalars)
    op.scalars.push_back(add_input(c, scalar_buffer(s, c.device), hlo::Type{static_cast<hlo::DType>(s.type), {}}));
  if (meta->needs_rng) {
    auto [seed, offset] = rng_words(st.generator, c.device, meta->rng_counters);
    hlo::Type word{hlo::DType::U64, {}};
    op.seed = add_input(c, std::move(seed), word);
    op.offset = add_input(c, std::move(offset), word);
  }
  c.key += '>';

  if (plan.mode == Mode::Inplace) {
    StorageUse& self = st.storages.at(st.records.at(0).storage);
    auto pv = add_result(c, self.type, meta->producer);
    op.results.push_back(pv->id);
    self.storage->buffer = nullptr;
    self.storage->pending = std::move(pv);
    c.storage_slot.erase(self.storage);
    c10::IValue out = (*stack)[stack->size() - num_args];
    torch::jit::drop(*stack, num_args);
    stack->push_back(std::move(out));
  } else {
    std::vector<at::Tensor> results;
    for (const Output& o : meta->outputs) {
      auto pv = add_result(c, hlo::Type{o.dtype, o.sizes}, meta->producer);
      op.results.push_back(pv->id);
      at::Tensor t = empty_tpu(o.sizes, aten_dtype(o.dtype), c.device);
      storage_of(t)->pending = std::move(pv);
      results.push_back(std::move(t));
    }
    torch::jit::drop(*stack, num_args);
    push_results(stack, *meta, [&](size_t j) { return results[j]; });
  }
  op.meta = std::move(meta);
  op.records = std::move(st.records);
  c.ops.push_back(std::move(op));
  g_stats.ops += 1;
  if (c.ops.size() >= max_ops()) flush_locked("size");
}

void flush(const char* reason) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  flush_locked(reason);
}

namespace {
// Reads of pending storages and torch.tpu.synchronize run the cluster
// through these hooks.
const bool g_hooks_installed = [] {
  pending_work::install(&flush, &generation);
  return true;
}();
}  // namespace

Stats stats() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Stats s = g_stats;
  s.pending_ops = static_cast<int64_t>(g_cluster.ops.size());
  return s;
}

void reset_stats() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_stats = Stats{};
  program_cache_clear(ProgramMode::Fused);
}

}  // namespace tt::backend::fused
