#include "backend/pipeline/fused_cluster.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "backend/device/generator.h"
#include "backend/device/pending_work.h"
#include "backend/pipeline/program_runner.h"
#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"
#include "lowering/graph.h"
#include "settings/settings.h"

namespace tt::backend::fused {
namespace {

using Kind = lowering::Arg::Kind;

// A value inside the cluster: a program input (a storage's buffer, a
// scalar), a view read, a call's result or a write-back. A result that a
// storage holds is live through its PendingValue.
struct Slot {
  hlo::Type type;
  int input = -1;                       // index into Cluster::inputs
  std::weak_ptr<PendingValue> pending;  // a result; live while a storage holds it
};

// The calls recorded so far, as a lowering::Graph whose value ids are slot
// ids (renumbered, inputs first, when it is lowered).
struct Cluster {
  uint64_t generation = 1;
  int device = -1;
  std::vector<Slot> slots;
  std::vector<runtime::BufferPtr> inputs;
  std::unordered_map<const DeviceStorage*, int> storage_slot;  // a storage's buffer, once an input
  lowering::Graph graph;
  std::vector<std::string> producers;  // per recorded call, for messages
  lowering::MatmulPrecision precision = lowering::MatmulPrecision::Highest;
  // The random calls draw one contiguous counter range of one generator, as
  // a torch.compile graph's do; the program reads its seed and start.
  TpuGenerator* rng = nullptr;
  uint64_t rng_seed = 0, rng_next = 0;
  runtime::BufferPtr seed_word, offset_word;
  std::string key;  // the op sequence, shapes and wiring
};

// Recursive: a flush may be asked for while one is being recorded (never
// re-entering the same cluster: the cluster is detached before it runs).
std::recursive_mutex g_mu;
Cluster g_cluster;
Stats g_stats;

// TORCH_TPU_EAGER_MODE, read at first use (a bad value is that call's error).
bool& g_fused() {
  static bool fused = settings::Enum(settings::Id::TORCH_TPU_EAGER_MODE) == "fused";
  return fused;
}

size_t max_ops() {
  static size_t n = [] {
    return static_cast<size_t>(settings::Int(settings::Id::TORCH_TPU_FUSED_MAX_OPS));
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

int add_value(Cluster& c, const hlo::Type& type) {
  Slot s;
  s.type = type;
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
  for (const auto& p : c.producers) {
    if (n++ == 8) {
      s += ", ... (" + std::to_string(c.producers.size()) + " ops)";
      break;
    }
    s += (s.empty() ? "" : ", ") + p;
  }
  return "a fused eager cluster of " + std::to_string(c.producers.size()) + " ops (" + s + ")";
}

// The cluster's graph with value ids renumbered as lower_graph wants them
// (inputs first, in input order), returning `outs`.
lowering::Graph numbered_graph(const Cluster& c, const std::vector<int>& outs) {
  std::vector<int> id(c.slots.size(), -1);
  lowering::Graph g;
  int next = 0;
  for (size_t i = 0; i < c.slots.size(); ++i)
    if (c.slots[i].input >= 0) {
      id[i] = next++;
      g.inputs.push_back(c.slots[i].type);
    }
  for (size_t i = 0; i < c.slots.size(); ++i)
    if (c.slots[i].input < 0) id[i] = next++;
  auto renumber = [&](int slot) { return slot < 0 ? -1 : id[slot]; };
  g.nodes = c.graph.nodes;
  for (auto& n : g.nodes) {
    for (auto& a : n.args) {
      a.value = renumber(a.value);
      for (int& v : a.values) v = renumber(v);
    }
    for (int& v : n.out_values) v = renumber(v);
  }
  for (int slot : outs) g.outputs.push_back(id[slot]);
  // Inputs lend their buffers to results of their type (XLA keeps the values
  // right whatever the pairing). A storage's input goes first to the last
  // write-back into that storage, then any input to any free result. A run
  // donates a buffer only when the cluster alone holds it, as after an
  // in-place write to all of a storage.
  std::unordered_map<int, int> written_to;  // slot of a storage's contents -> slot written from it
  for (const auto& n : c.graph.nodes)
    if (n.step == lowering::GraphNode::Step::WriteView) written_to[n.args.at(0).value] = n.out_values.at(0);
  std::unordered_map<int, size_t> out_index;
  for (size_t k = 0; k < outs.size(); ++k) out_index[outs[k]] = k;
  std::vector<bool> in_taken(g.inputs.size(), false), out_taken(outs.size(), false);
  auto pair = [&](size_t in, size_t k) {
    in_taken[in] = out_taken[k] = true;
    g.updates.emplace_back(static_cast<int>(in), static_cast<int>(k));
  };
  for (size_t i = 0; i < c.slots.size(); ++i) {
    if (c.slots[i].input < 0) continue;
    int v = static_cast<int>(i);
    for (auto it = written_to.find(v); it != written_to.end(); it = written_to.find(v)) v = it->second;
    auto k = out_index.find(v);
    size_t in = static_cast<size_t>(id[i]);
    if (v != static_cast<int>(i) && k != out_index.end() && !out_taken[k->second] &&
        c.slots[v].type == g.inputs[in])
      pair(in, k->second);
  }
  for (size_t in = 0; in < g.inputs.size(); ++in)
    for (size_t k = 0; k < outs.size() && !in_taken[in]; ++k)
      if (!out_taken[k] && c.slots[outs[k]].type == g.inputs[in]) pair(in, k);
  return g;
}

std::shared_ptr<CachedProgram> compile(const Cluster& c, const std::vector<int>& outs) {
  lowering::set_matmul_precision(c.precision);
  lowering::LoweredGraph lowered;
  try {
    lowered = lowering::lower_graph(numbered_graph(c, outs));
  } catch (const std::exception& e) {
    // Every call lowered when it was recorded, so this is a bug, not a fallback.
    TORCH_CHECK(false, "tpu: lowering ", describe(c), " failed: ", e.what());
  }
  TORCH_CHECK(lowered.needs_rng == (c.rng != nullptr), "tpu: ", describe(c), " disagrees on drawing random numbers");
  auto p = std::make_shared<CachedProgram>();
  p->exe = compile_program(lowered.module_text, ProgramMode::Fused, describe(c),
                           " (run with TORCH_TPU_EAGER_MODE=strict or TORCH_TPU_LAUNCH_BLOCKING=1 to find the op)");
  if (!lowered.checks.empty())
    p->checks = std::make_shared<const std::vector<lowering::CheckInfo>>(std::move(lowered.checks));
  for (const auto& alias : lowered.aliases) p->aliased_params.push_back(alias.first);
  return p;
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
      prog = compile(c, outs);
      store_program(key, ProgramMode::Fused, prog);
    }
    ProgramArgs inputs;
    for (const auto& b : c.inputs) inputs.add(b.get());
    // The cluster alone holds a buffer whose storage was overwritten whole.
    for (int param : prog->aliased_params) inputs.set_aliased(param, c.inputs.at(param).use_count() == 1);
    if (c.rng) {
      inputs.add(c.seed_word.get());
      inputs.add(c.offset_word.get());
    }
    std::vector<runtime::BufferPtr> bufs = run_program(*prog->exe, inputs, c.device, describe(c), prog->checks);
    for (size_t i = 0; i < live.size(); ++i) live[i]->result = bufs.at(i);
  } catch (const std::exception& e) {
    for (auto& pv : live) pv->error = e.what();
    throw;
  }
}

void flush_locked(const char* reason) {
  if (g_cluster.producers.empty()) return;
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
  g_fused() = m == "fused";
}

std::string mode() { return g_fused() ? "fused" : "strict"; }
bool recording() { return g_fused() && !launch_blocking(); }

uint64_t generation() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_cluster.generation;
}

namespace {

// The slot of a tensor argument's value: its view read out of its storage's
// slot, or (a CPU 0-d tensor) its scalar input.
int tensor_slot(Cluster& c, const ArgRecord& r, const std::vector<int>& storages, const std::vector<int>& scalars) {
  if (r.storage < 0) return scalars.at(r.scalar);
  lowering::GraphNode read;
  read.step = lowering::GraphNode::Step::ReadView;
  lowering::GraphArg from;
  from.kind = Kind::Tensor;
  from.value = storages.at(r.storage);
  read.args.push_back(std::move(from));
  read.view = r.view;
  read.dtype = r.dtype;
  read.out_values.push_back(add_value(c, hlo::Type{r.dtype, r.view.sizes}));
  c.graph.nodes.push_back(std::move(read));
  return c.graph.nodes.back().out_values[0];
}

lowering::GraphArg graph_arg(Cluster& c, const ArgRecord& r, const std::vector<int>& storages,
                             const std::vector<int>& scalars) {
  lowering::GraphArg g;
  static_cast<lowering::HostArg&>(g) = r;
  if (r.kind == Kind::Tensor) {
    g.value = tensor_slot(c, r, storages, scalars);
    g.contiguous = r.storage < 0 || r.view.numel() == 0 || r.view.contiguous();
  } else if (r.kind == Kind::Scalar) {
    g.value = scalars.at(r.scalar);
  } else if (r.kind == Kind::TensorList) {
    for (const auto& e : r.elems) g.values.push_back(e.kind == Kind::Tensor ? tensor_slot(c, e, storages, scalars) : -1);
  }
  return g;
}

// Reserves the call's random counters; the cluster runs first when they do
// not continue its counter range (another generator, a new seed).
void reserve_rng(const CallState& st, const OpMeta& meta) {
  TpuGenerator* gen = generator_or_default(st.generator, st.device);
  uint64_t seed, offset;
  {
    std::lock_guard<std::mutex> glock(gen->mutex_);
    seed = gen->current_seed();
    offset = gen->reserve(static_cast<uint64_t>(meta.rng_counters));
  }
  if (g_cluster.rng && (g_cluster.rng != gen || g_cluster.rng_seed != seed || g_cluster.rng_next != offset))
    flush_locked("rng");
  Cluster& c = g_cluster;
  if (!c.rng) {
    c.rng = gen;
    c.rng_seed = seed;
    c.rng_next = offset;
    auto& rt = runtime_for(st.device);
    c.seed_word = rt.FromHost(&seed, runtime::ElementType::U64, {}, st.device);
    c.offset_word = rt.FromHost(&offset, runtime::ElementType::U64, {}, st.device);
  }
  c.rng_next += static_cast<uint64_t>(meta.rng_counters);
}

}  // namespace

void record(const OpPlan& plan, torch::jit::Stack* stack, size_t num_args, CallState& st, const std::string& key,
            std::shared_ptr<OpMeta> meta, lowering::MatmulPrecision precision) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (g_cluster.device >= 0 && g_cluster.device != st.device) flush_locked("device");
  if (!g_cluster.producers.empty() && g_cluster.precision != precision) flush_locked("precision");
  if (meta->needs_rng) reserve_rng(st, *meta);
  Cluster& c = g_cluster;
  c.device = st.device;
  c.precision = precision;
  c.key += key;
  c.key += '<';
  std::vector<int> storages, scalars;
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
    storages.push_back(slot);
    key_int(c.key, slot);
  }
  // Every scalar is its own input, so a changing value never changes the
  // cluster (a learning rate schedule does not recompile).
  for (const auto& s : st.scalars)
    scalars.push_back(add_input(c, scalar_buffer(s, c.device), hlo::Type{hlo_dtype(s.type), {}}));
  c.key += '>';

  lowering::GraphNode node;
  node.op = plan.functional;
  node.types_known = meta->types_known;
  node.rng_counters = meta->needs_rng ? meta->rng_counters : -1;
  for (const auto& r : st.records) node.args.push_back(graph_arg(c, r, storages, scalars));
  if (meta->types_known) node.out_types = meta->rule_types;

  if (plan.mode == Mode::Inplace) {
    // The functional result, written back through self's view.
    const ArgRecord& self_record = st.records.at(0);
    StorageUse& self = st.storages.at(self_record.storage);
    int result = add_value(c, hlo::Type{self_record.dtype, self_record.view.sizes});
    node.out_values.assign(meta->types_known ? meta->rule_types.size() : 1, -1);
    node.out_values.at(0) = result;
    c.graph.nodes.push_back(std::move(node));
    auto pv = add_result(c, self.type, meta->producer);
    lowering::GraphNode write;
    write.step = lowering::GraphNode::Step::WriteView;
    write.args.resize(2);
    write.args[0].kind = write.args[1].kind = Kind::Tensor;
    write.args[0].value = storages.at(self_record.storage);
    write.args[1].value = result;
    write.view = self_record.view;
    write.dtype = self_record.dtype;
    write.out_values.push_back(pv->id);
    c.graph.nodes.push_back(std::move(write));
    self.storage->buffer = nullptr;
    self.storage->pending = std::move(pv);
    c.storage_slot.erase(self.storage);
    c10::IValue out = (*stack)[stack->size() - num_args];
    torch::jit::drop(*stack, num_args);
    stack->push_back(std::move(out));
  } else {
    std::vector<at::Tensor> results;
    size_t next_output = 0;
    for (int list_size : meta->list_sizes) {
      size_t n = list_size < 0 ? 1 : static_cast<size_t>(list_size);
      for (size_t j = 0; j < n; ++j) {
        if (list_size == kMaskedOutput) {
          node.out_values.push_back(-1);
          continue;
        }
        const Output& o = meta->outputs.at(next_output++);
        auto pv = add_result(c, hlo::Type{o.dtype, o.sizes}, meta->producer);
        node.out_values.push_back(pv->id);
        at::Tensor t = empty_tpu(o.sizes, aten_dtype(o.dtype), c.device);
        storage_of(t)->pending = std::move(pv);
        results.push_back(std::move(t));
      }
    }
    c.graph.nodes.push_back(std::move(node));
    torch::jit::drop(*stack, num_args);
    push_results(stack, *meta, [&](size_t j) { return results[j]; });
  }
  c.producers.push_back(meta->producer);
  g_stats.ops += 1;
  if (c.producers.size() >= max_ops()) flush_locked("size");
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
  s.pending_ops = static_cast<int64_t>(g_cluster.producers.size());
  return s;
}

void reset_stats() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_stats = Stats{};
  program_cache_clear(ProgramMode::Fused);
}

}  // namespace tt::backend::fused
