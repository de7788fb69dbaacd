#include "backend/executor.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backend/cpu_fallback.h"
#include "backend/generator.h"
#include "backend/nonzero.h"
#include "backend/tpu_device.h"
#include "lowering/helpers.h"
#include "lowering/view.h"

namespace tt::backend {

using lowering::Arg;
using Kind = lowering::Arg::Kind;

namespace {

// ---- per-call argument records ------------------------------------------------

struct StorageUse {
  DeviceStorage* storage;
  runtime::BufferPtr buffer;
};

struct ScalarUse {
  runtime::ElementType type;
  uint64_t bits;  // the value's bytes (double, int64 or bool), zero-extended
};

// What the program needs to know about one argument (or list element).
struct ArgRecord {
  Kind kind = Kind::None;
  int storage = -1;          // Tensor on tpu: index into CallState::storages
  int scalar = -1;           // Scalar or CPU 0-d tensor: index into CallState::scalars
  lowering::View view;
  hlo::DType dtype = hlo::DType::F32;
  bool wrapped = false;
  hlo::DType scalar_kind = hlo::DType::F64;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<bool> bools;
  std::string s;
  std::vector<ArgRecord> elems;  // TensorList / Tensor?[]
};

struct CallState {
  std::vector<StorageUse> storages;
  std::vector<ScalarUse> scalars;
  std::vector<ArgRecord> records;
  int device = -1;
  std::optional<at::Generator> generator;
};

hlo::DType hlo_dtype(at::ScalarType t) { return static_cast<hlo::DType>(to_element_type(t)); }
at::ScalarType aten_dtype(hlo::DType t) { return to_scalar_type(static_cast<runtime::ElementType>(t)); }

void key_int(std::string& key, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  key.append(buf, r.ptr);
  key.push_back(',');
}

void key_ints(std::string& key, c10::IntArrayRef v) {
  key.push_back('[');
  for (auto x : v) key_int(key, x);
  key.push_back(']');
}

bool is_scalar_schema_type(const c10::TypePtr& t) {
  c10::TypePtr u = t;
  if (auto opt = t->cast<c10::OptionalType>()) u = opt->getElementType();
  return u->kind() == c10::TypeKind::NumberType;
}

[[noreturn]] void device_mismatch(int a, const at::Device& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              a, " and ", b, "!");
}

int add_scalar(CallState& st, runtime::ElementType type, uint64_t bits) {
  st.scalars.push_back({type, bits});
  return static_cast<int>(st.scalars.size()) - 1;
}

void encode_tensor(const at::Tensor& t, CallState& st, std::string& key, ArgRecord& rec) {
  if (!t.defined()) {
    rec.kind = Kind::None;
    key += "N;";
    return;
  }
  rec.kind = Kind::Tensor;
  if (t.device().is_privateuseone()) {
    int dev = t.device().index();
    if (st.device < 0) st.device = dev;
    else if (st.device != dev) device_mismatch(st.device, t.device());
    rec.dtype = hlo_dtype(t.scalar_type());
    DeviceStorage* s = storage_of(t);
    int idx = -1;
    for (size_t k = 0; k < st.storages.size(); ++k)
      if (st.storages[k].storage == s) idx = static_cast<int>(k);
    if (idx < 0) {
      st.storages.push_back({s, storage_buffer(s, t.scalar_type())});
      idx = static_cast<int>(st.storages.size()) - 1;
    }
    rec.storage = idx;
    rec.view.sizes = t.sizes().vec();
    rec.view.strides = t.strides().vec();
    rec.view.offset = t.storage_offset();
    const auto& buf = st.storages[idx].buffer;
    key += 'T';
    key_int(key, static_cast<int>(rec.dtype));
    key_ints(key, t.sizes());
    key_ints(key, t.strides());
    key_int(key, rec.view.offset);
    key += 's';
    key_int(key, idx);
    key_int(key, static_cast<int>(buf->type()));
    key_ints(key, buf->dims());
    return;
  }
  // A CPU tensor is allowed only as a 0-d value (as in CUDA): a Python number
  // PyTorch wrapped, or torch.tensor(2.0).
  if (t.dim() != 0 || !t.device().is_cpu()) {
    if (st.device >= 0) device_mismatch(st.device, t.device());
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found a ", t.device(),
                " tensor of ", t.dim(), " dimensions; move it to tpu first");
  }
  rec.dtype = hlo_dtype(t.scalar_type());
  rec.wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
  uint64_t bits = 0;
  std::memcpy(&bits, t.const_data_ptr(), t.element_size());
  rec.scalar = add_scalar(st, to_element_type(t.scalar_type()), bits);
  key += rec.wrapped ? 'w' : 'c';
  key_int(key, static_cast<int>(rec.dtype));
}

void encode_scalar(const c10::Scalar& v, bool static_value, CallState& st, std::string& key,
                   ArgRecord& rec) {
  rec.kind = Kind::Scalar;
  uint64_t bits = 0;
  runtime::ElementType type;
  if (v.isBoolean()) {
    rec.b = v.toBool();
    rec.i = rec.b;
    rec.d = rec.b;
    rec.scalar_kind = hlo::DType::Pred;
    type = runtime::ElementType::Pred;
    bits = rec.b;
  } else if (v.isIntegral(false)) {
    rec.i = v.toLong();
    rec.d = static_cast<double>(rec.i);
    rec.scalar_kind = hlo::DType::S64;
    type = runtime::ElementType::S64;
    std::memcpy(&bits, &rec.i, 8);
  } else {
    TORCH_CHECK_TYPE(!v.isComplex(), "tpu does not support complex scalars yet");
    rec.d = v.toDouble();
    rec.i = static_cast<int64_t>(rec.d);
    rec.scalar_kind = hlo::DType::F64;
    type = runtime::ElementType::F64;
    std::memcpy(&bits, &rec.d, 8);
  }
  rec.scalar = add_scalar(st, type, bits);
  key += 'S';
  key_int(key, static_cast<int>(rec.scalar_kind));
  if (static_value) {
    key += '=';
    key_int(key, static_cast<int64_t>(bits));
  }
}

void encode(const c10::IValue& v, const c10::Argument& schema_arg, bool static_scalars, CallState& st,
            std::string& key, ArgRecord& rec) {
  if (v.isNone()) {
    rec.kind = Kind::None;
    key += "N;";
  } else if (v.isTensor()) {
    encode_tensor(v.toTensor(), st, key, rec);
  } else if (is_scalar_schema_type(schema_arg.type()) && (v.isDouble() || v.isInt() || v.isBool() || v.isScalar())) {
    encode_scalar(v.toScalar(), static_scalars, st, key, rec);
  } else if (v.isBool()) {
    rec.kind = Kind::Bool;
    rec.b = v.toBool();
    key += rec.b ? "b1;" : "b0;";
  } else if (v.isInt()) {
    rec.kind = Kind::Int;
    rec.i = v.toInt();
    key += 'i';
    key_int(key, rec.i);
  } else if (v.isDouble()) {
    rec.kind = Kind::Double;
    rec.d = v.toDouble();
    int64_t bits;
    std::memcpy(&bits, &rec.d, 8);
    key += 'd';
    key_int(key, bits);
  } else if (v.isIntList()) {
    rec.kind = Kind::IntList;
    rec.ints = v.toIntVector();
    key += 'I';
    key_ints(key, rec.ints);
  } else if (v.isDoubleList()) {
    rec.kind = Kind::DoubleList;
    rec.doubles = v.toDoubleVector();
    key += 'D';
    for (double d : rec.doubles) {
      int64_t bits;
      std::memcpy(&bits, &d, 8);
      key_int(key, bits);
    }
  } else if (v.isBoolList()) {
    rec.kind = Kind::BoolList;
    for (bool x : v.toBoolList()) rec.bools.push_back(x);
    key += 'B';
    for (bool x : rec.bools) key += x ? '1' : '0';
  } else if (v.isString()) {
    rec.kind = Kind::String;
    rec.s = v.toStringRef();
    key += "'" + rec.s + "'";
  } else if (v.isTensorList() || v.isList()) {
    rec.kind = Kind::TensorList;
    key += 'L';
    for (const c10::IValue& e : v.toListRef()) {
      rec.elems.emplace_back();
      if (e.isNone()) {
        key += "N;";
      } else {
        TORCH_CHECK(e.isTensor(), "tpu: unsupported list element ", e.tagKind());
        encode_tensor(e.toTensor(), st, key, rec.elems.back());
      }
    }
    key += ';';
  } else if (v.isGenerator()) {
    rec.kind = Kind::None;
    st.generator = v.toGenerator();
    key += "G;";
  } else if (v.isDevice()) {
    rec.kind = Kind::None;
    auto d = v.toDevice();
    if (d.is_privateuseone() && st.device < 0) st.device = d.has_index() ? d.index() : current_device();
    key += "V;";
  } else {
    TORCH_CHECK(false, "tpu executor: unsupported argument kind ", v.tagKind());
  }
}

// ---- the program cache -------------------------------------------------------

struct Output {
  hlo::DType dtype;
  std::vector<int64_t> sizes;
};

struct Entry {
  uint64_t last_used = 0;  // g_use_clock when last hit (least recently used goes first)
  runtime::ExecutablePtr exe;
  std::vector<Output> outputs;        // Functional: one per result tensor
  std::vector<int> return_list_sizes;  // per schema return: -1 a Tensor, n a Tensor[] of n
  bool needs_rng = false;
  int64_t rng_counters = 0;
};

std::mutex g_cache_mu;
std::unordered_map<std::string, std::shared_ptr<Entry>> g_cache;
CacheStats g_stats;
uint64_t g_use_clock = 0;

// Every loaded executable holds JIT code mappings (about three on XLA's CPU
// plugin, against a kernel limit of ~65k per process), so the cache is
// bounded: past the cap, the least recently used half is dropped (programs
// still running stay alive through their callers' references).
size_t cache_capacity() {
  static size_t cap = [] {
    const char* v = getenv("TORCH_TPU_PROGRAM_CACHE_ENTRIES");
    long n = v ? std::atol(v) : 0;
    return n > 0 ? static_cast<size_t>(n) : size_t{4096};
  }();
  return cap;
}

void evict_if_full() {  // caller holds g_cache_mu
  if (g_cache.size() <= cache_capacity()) return;
  std::vector<uint64_t> uses;
  uses.reserve(g_cache.size());
  for (const auto& kv : g_cache) uses.push_back(kv.second->last_used);
  std::nth_element(uses.begin(), uses.begin() + uses.size() / 2, uses.end());
  uint64_t median = uses[uses.size() / 2];
  for (auto it = g_cache.begin(); it != g_cache.end();) {
    if (it->second->last_used < median) {
      it = g_cache.erase(it);
      g_stats.evictions += 1;
    } else {
      ++it;
    }
  }
}

// Device-resident copies of recently used scalars (buffers are immutable, so
// one upload of 0.5 serves every later op that passes 0.5).
runtime::BufferPtr scalar_buffer(const ScalarUse& s, int device) {
  static std::mutex mu;
  static std::unordered_map<std::string, runtime::BufferPtr> cache;
  std::string k(sizeof(int) * 2 + 8, '\0');
  int t = static_cast<int>(s.type);
  std::memcpy(&k[0], &t, sizeof(int));
  std::memcpy(&k[sizeof(int)], &device, sizeof(int));
  std::memcpy(&k[sizeof(int) * 2], &s.bits, 8);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k);
    if (it != cache.end()) return it->second;
  }
  auto buf = runtime_for(device).FromHost(&s.bits, s.type, {}, device);
  buf->ExcludeFromAccounting();
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();
  cache[k] = buf;
  return buf;
}

// ---- result types from PyTorch's meta kernels ------------------------------------

// return_list_sizes entry for an undefined result (output_mask false).
constexpr int kMaskedOutput = -2;

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined()) return t;
  // CPU 0-d values stay on the CPU: meta kernels accept CPU scalars, and
  // Python meta kernels read wrapped numbers' values.
  if (t.device().is_cpu()) return t;
  int64_t storage_numel = static_cast<int64_t>(storage_of(t)->nbytes / t.element_size());
  at::Tensor base = at::empty({storage_numel}, t.options().device(at::kMeta));
  return base.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> ts;
    for (const auto& t : v.toTensorList()) ts.push_back(to_meta(t));
    return ts;
  }
  if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
    c10::List<std::optional<at::Tensor>> l;
    for (const auto& e : v.toListRef())
      l.push_back(e.isNone() ? std::optional<at::Tensor>() : std::optional<at::Tensor>(to_meta(e.toTensor())));
    return l;
  }
  if (v.isDevice()) return c10::Device(at::kMeta);
  if (v.isGenerator()) return c10::IValue();
  return v;
}

// Runs `op` on meta tensors shaped like the arguments. PyTorch's own checks
// run here, so a bad call raises exactly the error it raises on the CPU.
// Returns false when the op has no meta kernel.
bool infer_types(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                 std::vector<hlo::Type>& types, std::vector<int>& list_sizes) {
  torch::jit::Stack meta;
  for (const auto& v : args) meta.push_back(to_meta(v));
  try {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.callBoxed(&meta);
  } catch (const c10::NotImplementedError&) {
    // No meta kernel (or a composite one that refuses meta tensors, as
    // convolution_overrideable does): the rule derives its result types.
    return false;
  }
  types.clear();
  list_sizes.clear();
  for (const auto& r : meta) {
    if (r.isNone() || (r.isTensor() && !r.toTensor().defined())) {
      // A backward op's output that output_mask switched off.
      types.push_back(hlo::Type{hlo::DType::Pred, {}});
      list_sizes.push_back(kMaskedOutput);
    } else if (r.isTensor()) {
      const at::Tensor& t = r.toTensor();
      types.push_back(hlo::Type{hlo_dtype(t.scalar_type()), t.sizes().vec()});
      list_sizes.push_back(-1);
    } else if (r.isTensorList()) {
      auto l = r.toTensorList();
      for (const at::Tensor& t : l) types.push_back(hlo::Type{hlo_dtype(t.scalar_type()), t.sizes().vec()});
      list_sizes.push_back(static_cast<int>(l.size()));
    } else {
      TORCH_CHECK(false, "tpu executor: ", op.schema().name(), " returns a non-tensor value");
    }
  }
  return true;
}

// ---- program building ---------------------------------------------------------------

struct ProgramInputs {
  hlo::Values storages, scalars;
  hlo::Value seed, offset;
};

Arg build_arg(hlo::Builder& b, const ArgRecord& r, const ProgramInputs& in) {
  Arg a;
  a.kind = r.kind;
  a.i = r.i;
  a.d = r.d;
  a.b = r.b;
  a.ints = r.ints;
  a.doubles = r.doubles;
  a.bools = r.bools;
  a.s = r.s;
  a.wrapped = r.wrapped;
  a.scalar_kind = r.scalar_kind;
  if (r.kind == Kind::Tensor) {
    if (r.storage >= 0) {
      hlo::Value storage = in.storages[r.storage];
      storage = lowering::reinterpret_storage(b, storage, r.dtype);  // a view of another dtype's bytes
      a.tensor = lowering::read_view(b, storage, r.view);
    } else {
      a.tensor = in.scalars[r.scalar];
    }
  } else if (r.kind == Kind::Scalar) {
    a.tensor = in.scalars[r.scalar];
  } else if (r.kind == Kind::TensorList) {
    for (const auto& e : r.elems) a.tensors.push_back(e.kind == Kind::Tensor ? build_arg(b, e, in).tensor : hlo::Value{});
  }
  return a;
}

std::string describe_args(const CallState& st) {
  std::string s;
  for (const auto& r : st.records) {
    if (r.kind == Kind::Tensor) {
      s += s.empty() ? "" : ", ";
      s += std::string(hlo::mlir_name(r.dtype)) + hlo::i64_list(r.view.sizes);
    }
  }
  return s;
}

std::shared_ptr<Entry> build_entry(const OpPlan& plan, const c10::OperatorHandle& op,
                                   c10::ArrayRef<c10::IValue> args, const CallState& st) {
  auto entry = std::make_shared<Entry>();
  lowering::Context ctx;
  ctx.op = plan.functional;
  std::vector<int> list_sizes;
  bool known = false;
  if (plan.mode == Mode::Inplace) {
    std::vector<hlo::Type> inplace_types;
    infer_types(op, args, inplace_types, list_sizes);  // PyTorch's in-place checks
    known = infer_types(*plan.functional_op, args, ctx.out_types, list_sizes);
    list_sizes = {-1};
  } else {
    known = infer_types(op, args, ctx.out_types, list_sizes);
  }

  hlo::Builder b;
  ProgramInputs in;
  for (const auto& s : st.storages)
    in.storages.push_back(b.param(hlo::Type{static_cast<hlo::DType>(s.buffer->type()), s.buffer->dims()}));
  for (const auto& s : st.scalars) in.scalars.push_back(b.param(hlo::Type{static_cast<hlo::DType>(s.type), {}}));
  if (plan.rule->needs_rng) {
    in.seed = b.param(hlo::Type{hlo::DType::U64, {}});
    in.offset = b.param(hlo::Type{hlo::DType::U64, {}});
    ctx.rng_seed = in.seed;
    ctx.rng_offset = in.offset;
  }
  lowering::Args largs;
  for (const auto& r : st.records) largs.push_back(build_arg(b, r, in));

  hlo::Values results = plan.rule->fn(b, largs, ctx);
  if (known) {
    TORCH_CHECK(results.size() == ctx.out_types.size(), "tpu lowering of ", plan.functional, " returned ",
                results.size(), " results; PyTorch expects ", ctx.out_types.size());
    hlo::Values kept;
    size_t k = 0;
    for (int list_size : list_sizes) {
      size_t n = list_size == kMaskedOutput ? 1 : list_size < 0 ? 1 : static_cast<size_t>(list_size);
      for (size_t j = 0; j < n; ++j, ++k) {
        if (list_size == kMaskedOutput) continue;
        TORCH_CHECK(results[k].valid(), "tpu lowering of ", plan.functional, " gave no value for result ", k);
        kept.push_back(results[k]);
      }
    }
    if (kept.size() != results.size()) {
      // Drop masked outputs from the type list too, keeping the two aligned.
      std::vector<hlo::Type> types;
      size_t i = 0;
      for (int list_size : list_sizes) {
        size_t n = list_size < 0 ? 1 : static_cast<size_t>(list_size);
        for (size_t j = 0; j < n; ++j, ++i)
          if (list_size != kMaskedOutput) types.push_back(ctx.out_types[i]);
      }
      ctx.out_types = types;
      results = kept;
    }
    for (size_t k = 0; k < results.size(); ++k) {
      TORCH_CHECK(results[k].shape() == ctx.out_types[k].shape, "tpu lowering of ", plan.functional,
                  " produced shape ", hlo::i64_list(results[k].shape()), " for result ", k,
                  "; PyTorch expects ", hlo::i64_list(ctx.out_types[k].shape));
      results[k] = b.convert(results[k], ctx.out_types[k].dtype);
    }
  } else {
    list_sizes.clear();
    hlo::Values kept;
    for (const auto& r : results) {
      list_sizes.push_back(r.valid() ? -1 : kMaskedOutput);
      if (r.valid()) kept.push_back(r);
    }
    results = kept;
  }

  int64_t counters = 0;
  if (plan.mode == Mode::Inplace) {
    const ArgRecord& self = st.records.at(0);
    TORCH_CHECK(self.kind == Kind::Tensor && self.storage >= 0, plan.functional, ": in-place target is not a tpu tensor");
    hlo::Value storage = in.storages[self.storage];
    hlo::Value v = b.broadcast_to(b.convert(results.at(0), self.dtype), self.view.sizes);
    // Written in the view's dtype; the storage keeps its own dtype and shape.
    hlo::Value written = lowering::write_view(b, lowering::reinterpret_storage(b, storage, self.dtype), self.view, v);
    b.set_results({b.reshape(lowering::reinterpret_storage(b, written, storage.dtype()), storage.shape())});
    counters = lowering::numel(self.view.sizes);
  } else {
    for (const auto& r : results) {
      entry->outputs.push_back({r.dtype(), r.shape()});
      counters += r.type.numel();
    }
    b.set_results(results);
  }
  entry->return_list_sizes = list_sizes;
  entry->needs_rng = plan.rule->needs_rng;
  entry->rng_counters = counters;

  std::string text = b.module_text();
  auto t0 = std::chrono::steady_clock::now();
  try {
    entry->exe = runtime::Runtime::Get().Compile(text);
  } catch (const runtime::Error& e) {
    TORCH_CHECK(false, "tpu: XLA could not compile ", plan.functional, " for (", describe_args(st),
                "): ", e.what(), getenv("TORCH_TPU_DUMP_FAILED") ? "\n" + text : "");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (!entry->exe->from_disk()) {  // a load from the persistent cache is counted there (disk_hits)
    g_stats.compiles += 1;
    g_stats.compile_seconds += secs;
  }
  return entry;
}

}  // namespace

OpPlan make_plan(const std::string& functional, const lowering::Rule* rule, Mode mode,
                 std::optional<c10::OperatorHandle> functional_op) {
  OpPlan p{functional, rule, mode, std::move(functional_op)};
  if (functional == "aten::index.Tensor") p.mask_indexing = MaskIndexing::Read;
  if (functional == "aten::index_put" || functional == "aten::_index_put_impl") p.mask_indexing = MaskIndexing::Write;
  return p;
}

lowering::MatmulPrecision current_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGH: return lowering::MatmulPrecision::High;
    case at::Float32MatmulPrecision::MEDIUM: return lowering::MatmulPrecision::Medium;
    default: return lowering::MatmulPrecision::Highest;
  }
}

runtime::BufferPtr storage_buffer(DeviceStorage* s, at::ScalarType dtype) {
  if (s->buffer) return s->buffer;
  size_t item = c10::elementSize(dtype);
  int64_t n = static_cast<int64_t>(s->nbytes / item);
  std::vector<uint8_t> zeros(s->nbytes, 0);
  s->buffer = runtime_for(s->device).FromHost(zeros.data(), to_element_type(dtype), {n}, s->device);
  return s->buffer;
}

runtime::BufferPtr dense_buffer(const at::Tensor& t) {
  DeviceStorage* s = storage_of(t);
  runtime::BufferPtr buf = storage_buffer(s, t.scalar_type());
  int64_t storage_numel = static_cast<int64_t>(s->nbytes / t.element_size());
  lowering::View v{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
  if (buf->type() == to_element_type(t.scalar_type()) && lowering::covers_storage(v, storage_numel) &&
      buf->numel() == storage_numel)
    return buf;
  at::Tensor c = at::clone(t, at::MemoryFormat::Contiguous);
  return storage_of(c)->buffer;
}

void execute(const OpPlan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  {
    // Boolean masks in advanced indexing have data-dependent shapes; they
    // become integer indices first, except x[mask] = one value (a select).
    c10::IValue* a = &(*stack)[stack->size() - n];
    bool reads = plan.mask_indexing == MaskIndexing::Read;
    bool writes = plan.mask_indexing == MaskIndexing::Write;
    if ((reads || (writes && a[2].isTensor() && a[2].toTensor().numel() != 1)) && a[0].isTensor())
      expand_bool_indices(a[0].toTensor(), a[1]);
  }
  auto args = torch::jit::last(*stack, n);

  CallState st;
  st.records.resize(n);
  std::string key;
  key.reserve(256);
  key += plan.functional;
  key += plan.mode == Mode::Inplace ? "!" : ":";
  const auto precision = current_matmul_precision();
  key += static_cast<char>('0' + static_cast<int>(precision));
  for (size_t i = 0; i < n; ++i)
    encode(args[i], schema.arguments()[i], plan.rule->static_scalars, st, key, st.records[i]);
  if (st.device < 0) st.device = current_device();

  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      entry = it->second;
      entry->last_used = ++g_use_clock;
      g_stats.hits += 1;
    } else {
      g_stats.misses += 1;
    }
  }
  if (!entry) {
    try {
      lowering::set_matmul_precision(precision);
      entry = build_entry(plan, op, args, st);
    } catch (const lowering::LoweringError& e) {
      run_cpu_fallback(op, stack, std::string("lowering declined: ") + e.what());
      return;
    } catch (const std::out_of_range& e) {
      TORCH_CHECK_INDEX(false, e.what());
    } catch (const hlo::BuildError& e) {
      TORCH_CHECK(false, "tpu: internal error lowering ", plan.functional, " for (", describe_args(st), "): ", e.what());
    }
    std::lock_guard<std::mutex> lock(g_cache_mu);
    entry->last_used = ++g_use_clock;
    g_cache[key] = entry;
    evict_if_full();
  }

  const int device = st.device;
  std::vector<runtime::BufferPtr> keep;
  std::vector<runtime::Buffer*> inputs;
  for (const auto& s : st.storages) inputs.push_back(s.buffer.get());
  for (const auto& s : st.scalars) {
    keep.push_back(scalar_buffer(s, device));
    inputs.push_back(keep.back().get());
  }
  if (entry->needs_rng) {
    TpuGenerator* gen = generator_or_default(st.generator, device);
    std::lock_guard<std::mutex> lock(gen->mutex_);
    uint64_t seed = gen->current_seed();
    uint64_t offset = gen->reserve(static_cast<uint64_t>(entry->rng_counters));
    auto& rt = runtime_for(device);
    keep.push_back(rt.FromHost(&seed, runtime::ElementType::U64, {}, device));
    inputs.push_back(keep.back().get());
    keep.push_back(rt.FromHost(&offset, runtime::ElementType::U64, {}, device));
    inputs.push_back(keep.back().get());
  }

  std::vector<runtime::BufferPtr> outs;
  try {
    outs = entry->exe->Execute(inputs, device);
  } catch (const runtime::Error& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), "tpu:", device, " out of memory running ",
                     plan.functional, ": ", e.what());
    TORCH_CHECK(false, "tpu: running ", plan.functional, " failed: ", e.what());
  }
  if (!outs.empty()) track_pending(outs.back());

  if (plan.mode == Mode::Inplace) {
    st.storages[st.records[0].storage].storage->buffer = outs.at(0);
    c10::IValue self = args[0];
    torch::jit::drop(*stack, n);
    stack->push_back(std::move(self));
    return;
  }
  torch::jit::drop(*stack, n);
  size_t k = 0;
  for (int list_size : entry->return_list_sizes) {
    auto wrap = [&](size_t j) {
      const Output& o = entry->outputs[j];
      return wrap_buffer(outs[j], o.sizes, aten_dtype(o.dtype));
    };
    if (list_size == kMaskedOutput) {
      stack->push_back(at::Tensor());
    } else if (list_size < 0) {
      stack->push_back(wrap(k++));
    } else {
      std::vector<at::Tensor> l;
      for (int j = 0; j < list_size; ++j) l.push_back(wrap(k++));
      stack->push_back(std::move(l));
    }
  }
}

void execute_out(const c10::OperatorHandle& functional_op, const c10::OperatorHandle& op,
                 torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  auto args = torch::jit::last(*stack, n);
  std::vector<c10::IValue> outs;
  for (size_t i = 0; i < n; ++i)
    if (schema.arguments()[i].is_out()) outs.push_back(args[i]);
  // The functional op's arguments by name; a factory's dtype and device come
  // from the (first) out tensor, its layout and pin_memory are left unset.
  torch::jit::Stack inner;
  for (const auto& fa : functional_op.schema().arguments()) {
    bool found = false;
    for (size_t i = 0; i < n && !found; ++i) {
      if (schema.arguments()[i].is_out() || schema.arguments()[i].name() != fa.name()) continue;
      inner.push_back(args[i]);
      found = true;
    }
    if (found) continue;
    const at::Tensor first_out = outs.at(0).isTensor() ? outs[0].toTensor() : outs[0].toTensorList().get(0);
    if (fa.name() == "dtype") inner.push_back(static_cast<int64_t>(first_out.scalar_type()));
    else if (fa.name() == "device") inner.push_back(first_out.device());
    else inner.push_back(fa.default_value().value_or(c10::IValue()));
  }
  functional_op.callBoxed(&inner);
  std::vector<at::Tensor> results;
  for (const auto& r : inner) {
    if (r.isTensor()) results.push_back(r.toTensor());
    else for (const at::Tensor& t : r.toTensorList()) results.push_back(t);
  }
  std::vector<at::Tensor> out_tensors;
  for (const auto& o : outs) {
    if (o.isTensor()) out_tensors.push_back(o.toTensor());
    else for (const at::Tensor& t : o.toTensorList()) out_tensors.push_back(t);
  }
  TORCH_CHECK(out_tensors.size() == results.size(), op.schema().name(), ": expected ", results.size(),
              " out= tensors, got ", out_tensors.size());
  for (size_t i = 0; i < results.size(); ++i) {
    at::Tensor& out = out_tensors[i];
    TORCH_CHECK(at::canCast(results[i].scalar_type(), out.scalar_type()), "result type ",
                results[i].scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
    at::native::resize_output(out, results[i].sizes());
    out.copy_(results[i]);
  }
  torch::jit::drop(*stack, n);
  for (auto& o : outs) stack->push_back(std::move(o));
}

CacheStats cache_stats() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  CacheStats s = g_stats;
  s.entries = static_cast<int64_t>(g_cache.size());
  return s;
}

void cache_clear() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  g_cache.clear();
  g_stats = CacheStats{};
}

}  // namespace tt::backend
