#include "backend/pipeline/call_record.h"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backend/device/storage_contents.h"
#include "backend/device/tpu_device.h"

namespace tt::backend {

using Kind = lowering::Arg::Kind;


bool is_scalar_schema_type(const c10::TypePtr& t) {
  c10::TypePtr u = t;
  if (auto opt = t->cast<c10::OptionalType>()) u = opt->getElementType();
  return u->kind() == c10::TypeKind::NumberType;
}

bool is_tensor_schema_type(const c10::TypePtr& t) {
  c10::TypePtr u = t;
  if (auto opt = t->cast<c10::OptionalType>()) u = opt->getElementType();
  return u->kind() == c10::TypeKind::TensorType;
}

bool classify_host_arg(const c10::IValue& v, bool scalar_slot, lowering::HostArg& h) {
  if (v.isNone() || v.isGenerator() || v.isDevice()) {
    h.kind = Kind::None;
  } else if (scalar_slot && (v.isDouble() || v.isInt() || v.isBool() || v.isScalar())) {
    c10::Scalar s = v.toScalar();
    h.kind = Kind::Scalar;
    if (s.isBoolean()) {
      h.b = s.toBool();
      h.i = h.b;
      h.d = h.b;
      h.scalar_kind = hlo::DType::Pred;
    } else if (s.isIntegral(false)) {
      h.i = s.toLong();
      h.d = static_cast<double>(h.i);
      h.scalar_kind = hlo::DType::S64;
    } else if (s.isComplex()) {  // complex128: d holds the real part, imag the imaginary
      c10::complex<double> z = s.toComplexDouble();
      h.d = z.real();
      h.imag = z.imag();
      h.i = static_cast<int64_t>(h.d);
      h.scalar_kind = hlo::DType::C128;
    } else {
      h.d = s.toDouble();
      h.i = static_cast<int64_t>(h.d);
      h.scalar_kind = hlo::DType::F64;
    }
  } else if (v.isBool()) {
    h.kind = Kind::Bool;
    h.b = v.toBool();
    h.i = h.b;
  } else if (v.isInt()) {
    h.kind = Kind::Int;
    h.i = v.toInt();
    h.d = static_cast<double>(h.i);
  } else if (v.isDouble()) {
    h.kind = Kind::Double;
    h.d = v.toDouble();
  } else if (v.isIntList()) {
    h.kind = Kind::IntList;
    h.ints = v.toIntVector();
  } else if (v.isDoubleList()) {
    h.kind = Kind::DoubleList;
    h.doubles = v.toDoubleVector();
  } else if (v.isBoolList()) {
    h.kind = Kind::BoolList;
    for (bool x : v.toBoolList()) h.bools.push_back(x);
  } else if (v.isString()) {
    h.kind = Kind::String;
    h.s = v.toStringRef();
  } else if (v.isTensor() || v.isTensorList() || v.isList()) {
    return false;
  } else {
    TORCH_CHECK(false, "tpu: unsupported argument kind ", v.tagKind());
  }
  return true;
}

namespace {

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

[[noreturn]] void device_mismatch(int a, const at::Device& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              a, " and ", b, "!");
}

int add_scalar(CallState& st, runtime::ElementType type, uint64_t bits, uint64_t bits_hi = 0) {
  st.scalars.push_back({type, bits, bits_hi});
  return static_cast<int>(st.scalars.size()) - 1;
}

void encode_tensor(const at::Tensor& t, bool defer, CallState& st, std::string& key, ArgRecord& rec) {
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
      StorageUse use{s, nullptr, nullptr, {}};
      if (defer && deferrable(s)) {
        use.pending = s->pending;
        use.type = use.pending->type;
      } else {
        use.buffer = storage_buffer(s, t.scalar_type());
        use.type = hlo::Type{hlo_dtype(use.buffer->type()), use.buffer->dims()};
      }
      st.storages.push_back(std::move(use));
      idx = static_cast<int>(st.storages.size()) - 1;
    }
    rec.storage = idx;
    rec.view.sizes = t.sizes().vec();
    rec.view.strides = t.strides().vec();
    rec.view.offset = t.storage_offset();
    rec.view.conj = t.is_conj();
    rec.view.neg = t.is_neg();
    const hlo::Type& contents = st.storages[idx].type;
    key += 'T';
    if (rec.view.conj) key += '*';
    if (rec.view.neg) key += '-';
    key_int(key, static_cast<int>(rec.dtype));
    key_ints(key, t.sizes());
    key_ints(key, t.strides());
    key_int(key, rec.view.offset);
    key += 's';
    key_int(key, idx);
    key_int(key, static_cast<int>(contents.dtype));
    key_ints(key, contents.shape);
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
  uint64_t bits[2] = {0, 0};
  std::memcpy(bits, t.const_data_ptr(), std::min<size_t>(t.element_size(), sizeof(bits)));
  rec.scalar = add_scalar(st, to_element_type(t.scalar_type()), bits[0], bits[1]);
  key += rec.wrapped ? 'w' : 'c';
  key_int(key, static_cast<int>(rec.dtype));
}

// A Scalar's runtime slot and key: its value is a program input unless the
// rule reads host values (static_value), which then key the program.
void add_scalar_slot(bool static_value, CallState& st, std::string& key, ArgRecord& rec) {
  uint64_t bits = 0, bits_hi = 0;
  runtime::ElementType type;
  if (rec.scalar_kind == hlo::DType::C128) {  // a Python complex: its parts in two words
    type = runtime::ElementType::C128;
    std::memcpy(&bits, &rec.d, 8);
    std::memcpy(&bits_hi, &rec.imag, 8);
  } else if (rec.scalar_kind == hlo::DType::Pred) {
    type = runtime::ElementType::Pred;
    bits = rec.b;
  } else if (rec.scalar_kind == hlo::DType::S64) {
    type = runtime::ElementType::S64;
    std::memcpy(&bits, &rec.i, 8);
  } else {
    type = runtime::ElementType::F64;
    std::memcpy(&bits, &rec.d, 8);
  }
  rec.scalar = add_scalar(st, type, bits, bits_hi);
  key += 'S';
  key_int(key, static_cast<int>(rec.scalar_kind));
  if (static_value) {
    key += '=';
    key_int(key, static_cast<int64_t>(bits));
    if (type == runtime::ElementType::C128) key_int(key, static_cast<int64_t>(bits_hi));
  }
}

// The key of a classified host argument (every kind but tensors and Scalars).
void key_host(const lowering::HostArg& h, std::string& key) {
  switch (h.kind) {
    case Kind::None: key += "N;"; break;
    case Kind::Bool: key += h.b ? "b1;" : "b0;"; break;
    case Kind::Int: key += 'i'; key_int(key, h.i); break;
    case Kind::Double: {
      int64_t bits;
      std::memcpy(&bits, &h.d, 8);
      key += 'd';
      key_int(key, bits);
      break;
    }
    case Kind::IntList: key += 'I'; key_ints(key, h.ints); break;
    case Kind::DoubleList:
      key += 'D';
      for (double d : h.doubles) {
        int64_t bits;
        std::memcpy(&bits, &d, 8);
        key_int(key, bits);
      }
      break;
    case Kind::BoolList:
      key += 'B';
      for (bool x : h.bools) key += x ? '1' : '0';
      break;
    case Kind::String: key += "'" + h.s + "'"; break;
    default: break;
  }
}

void encode(const c10::IValue& v, const c10::Argument& schema_arg, bool static_scalars, bool defer,
            CallState& st, std::string& key, ArgRecord& rec) {
  if (v.isTensor()) {
    encode_tensor(v.toTensor(), defer, st, key, rec);
    return;
  }
  if (classify_host_arg(v, is_scalar_schema_type(schema_arg.type()), rec)) {
    if (rec.kind == Kind::Scalar) {
      add_scalar_slot(static_scalars, st, key, rec);
    } else if (v.isGenerator()) {
      st.generator = v.toGenerator();
      key += "G;";
    } else if (v.isDevice()) {
      auto d = v.toDevice();
      if (d.is_privateuseone() && st.device < 0) st.device = d.has_index() ? d.index() : current_device();
      key += "V;";
    } else {
      key_host(rec, key);
    }
    return;
  }
  rec.kind = Kind::TensorList;
  key += 'L';
  for (const c10::IValue& e : v.toListRef()) {
    rec.elems.emplace_back();
    if (e.isNone()) {
      key += "N;";
    } else {
      TORCH_CHECK(e.isTensor(), "tpu: unsupported list element ", e.tagKind());
      encode_tensor(e.toTensor(), defer, st, key, rec.elems.back());
    }
  }
  key += ';';
}

}  // namespace

// Device-resident copies of recently used scalars (buffers are immutable, so
// one upload of 0.5 serves every later op that passes 0.5).
runtime::BufferPtr scalar_buffer(const ScalarUse& s, int device) {
  static std::mutex mu;
  static std::unordered_map<std::string, runtime::BufferPtr> cache;
  const uint64_t words[2] = {s.bits, s.bits_hi};
  std::string k(sizeof(int) * 2 + 16, '\0');
  int t = static_cast<int>(s.type);
  std::memcpy(&k[0], &t, sizeof(int));
  std::memcpy(&k[sizeof(int)], &device, sizeof(int));
  std::memcpy(&k[sizeof(int) * 2], words, 16);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k);
    if (it != cache.end()) return it->second;
  }
  auto buf = runtime_for(device).FromHost(words, s.type, {}, device);
  buf->ExcludeFromAccounting();
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();
  cache[k] = buf;
  return buf;
}

void encode_call(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, bool static_scalars,
                 bool defer, CallState& st, std::string& key) {
  st.records.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    encode(args[i], schema.arguments()[i], static_scalars, defer, st, key, st.records[i]);
  if (st.device < 0) st.device = current_device();
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

}  // namespace tt::backend
