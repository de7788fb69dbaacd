#include "hlo/builder.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace tt::hlo {

const char* mlir_name(DType t) {
  switch (t) {
    case DType::Pred: return "i1";
    case DType::S8: return "i8";
    case DType::S16: return "i16";
    case DType::S32: return "i32";
    case DType::S64: return "i64";
    case DType::U8: return "ui8";
    case DType::U16: return "ui16";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F8E5M2: return "f8E5M2";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
  }
  throw BuildError("unknown dtype");
}

bool is_float(DType t) {
  return t == DType::F16 || t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F8E5M2 ||
         t == DType::F8E4M3FN;
}
bool is_unsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool is_complex(DType t) { return t == DType::C64 || t == DType::C128; }
bool is_int(DType t) { return !is_float(t) && !is_complex(t) && t != DType::Pred; }
DType real_dtype(DType t) { return t == DType::C64 ? DType::F32 : t == DType::C128 ? DType::F64 : t; }
DType complex_dtype(DType t) {
  if (is_complex(t)) return t;
  return t == DType::F64 ? DType::C128 : DType::C64;
}
int bit_width(DType t) {
  switch (t) {
    case DType::Pred: return 1;
    case DType::S8: case DType::U8: case DType::F8E5M2: case DType::F8E4M3FN: return 8;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 16;
    case DType::S32: case DType::U32: case DType::F32: return 32;
    case DType::C128: return 128;
    default: return 64;
  }
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string Type::str() const {
  std::string s = "tensor<";
  for (auto d : shape) s += std::to_string(d) + "x";
  return s + mlir_name(dtype) + ">";
}

std::string i64_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string i64_array(const std::vector<int64_t>& v) {
  if (v.empty()) return "array<i64>";
  std::string s = "array<i64: ";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ">";
}

static std::string types_str(const std::vector<Type>& ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s + ")";
}

Builder::Builder() { blocks_.emplace_back(); }

Value Builder::fresh(const Type& t) { return Value{next_id_++, t}; }

void Builder::line(const std::string& s) { blocks_.back().push_back(s); }

Value Builder::param(const Type& t) {
  Value v = fresh(t);
  params_.push_back(t);
  param_ids_.push_back(v.id);
  return v;
}

void Builder::set_results(const Values& results) { results_ = results; }

void Builder::alias_param(int param, int result) {
  if (param < 0 || param >= static_cast<int>(params_.size()))
    throw BuildError("alias_param: no parameter " + std::to_string(param));
  aliases_.emplace_back(param, result);
}

void Builder::set_num_replicas(int n) {
  if (n < 1) throw BuildError("set_num_replicas: " + std::to_string(n) + " replicas");
  num_replicas_ = n;
}

std::string Builder::module_text() const {
  std::ostringstream os;
  os << "module @torch_tpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " << num_replicas_
     << " : i32} {\n";
  os << "  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    os << (i ? ", " : "") << "%v" << param_ids_[i] << ": " << params_[i].str();
    for (const auto& [p, r] : aliases_) {
      if (p != static_cast<int>(i)) continue;
      if (r < 0 || r >= static_cast<int>(results_.size()) || !(results_[r].type == params_[i]))
        throw BuildError("alias_param: parameter " + std::to_string(p) + " and result " + std::to_string(r) +
                         " differ in type");
      os << " {tf.aliasing_output = " << r << " : i32}";
    }
  }
  os << ") -> (";
  for (size_t i = 0; i < results_.size(); ++i) os << (i ? ", " : "") << results_[i].type.str();
  os << ") {\n";
  for (const auto& l : blocks_.front()) os << "    " << l << "\n";
  os << "    \"func.return\"(";
  std::vector<Type> rts;
  for (size_t i = 0; i < results_.size(); ++i) {
    os << (i ? ", " : "") << results_[i].name();
    rts.push_back(results_[i].type);
  }
  os << ") : " << types_str(rts) << " -> ()\n  }\n";
  for (const auto& f : functions_) os << f.second << "\n";
  os << "}\n";
  return os.str();
}

void Builder::add_function(const std::string& symbol, const std::string& text) {
  for (const auto& f : functions_)
    if (f.first == symbol) return;
  functions_.emplace_back(symbol, text);
}

Values Builder::call(const std::string& symbol, const Values& args, const std::vector<Type>& results) {
  bool known = false;
  for (const auto& f : functions_) known |= f.first == symbol;
  if (!known) throw BuildError("func.call: no function @" + symbol + " was added to the module");
  return emit("func.call", args, results, "callee = @" + symbol);
}

Values Builder::emit(const std::string& op, const Values& operands,
                     const std::vector<Type>& result_types, const std::string& attrs,
                     const std::vector<std::string>& regions) {
  Values results;
  std::string s;
  for (size_t i = 0; i < result_types.size(); ++i) {
    results.push_back(fresh(result_types[i]));
    s += (i ? ", " : "") + results.back().name();
  }
  if (!results.empty()) s += " = ";
  s += "\"" + op + "\"(";
  std::vector<Type> in_types;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].valid()) throw BuildError(op + ": operand " + std::to_string(i) + " is not a value");
    s += (i ? ", " : "") + operands[i].name();
    in_types.push_back(operands[i].type);
  }
  s += ")";
  if (!regions.empty()) {
    s += " (";
    for (size_t i = 0; i < regions.size(); ++i) s += (i ? ", " : "") + regions[i];
    s += ")";
  }
  if (!attrs.empty()) s += " {" + attrs + "}";
  s += " : " + types_str(in_types) + " -> " + types_str(result_types);
  line(s);
  return results;
}

Value Builder::emit1(const std::string& op, const Values& operands, const Type& result,
                     const std::string& attrs, const std::vector<std::string>& regions) {
  return emit(op, operands, {result}, attrs, regions)[0];
}

std::string Builder::region(const std::vector<Type>& arg_types, const Body& body) {
  Values args;
  for (const auto& t : arg_types) args.push_back(fresh(t));
  blocks_.emplace_back();
  Values rets = body(*this, args);
  std::string ret = "\"stablehlo.return\"(";
  std::vector<Type> rts;
  for (size_t i = 0; i < rets.size(); ++i) {
    ret += (i ? ", " : "") + rets[i].name();
    rts.push_back(rets[i].type);
  }
  ret += ") : " + types_str(rts) + " -> ()";
  line(ret);
  std::vector<std::string> lines = std::move(blocks_.back());
  blocks_.pop_back();
  std::string s = "{\n      ^bb0(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].name() + ": " + args[i].type.str();
  s += "):\n";
  for (const auto& l : lines) s += "        " + l + "\n";
  return s + "    }";
}

// ---- constants ---------------------------------------------------------------

static std::string hex_bits(uint64_t bits, int nibbles) {
  static const char* hexd = "0123456789ABCDEF";
  std::string s = "0x";
  for (int i = nibbles - 1; i >= 0; --i) s += hexd[(bits >> (4 * i)) & 0xF];
  return s;
}

Value Builder::constant(double v, DType t, const Shape& shape) {
  if (is_complex(t)) return convert(constant(v, real_dtype(t), shape), t);
  if (!is_float(t)) {
    if (t == DType::Pred) return constant_int(v != 0.0, t, shape);
    return constant_int(static_cast<int64_t>(v), t, shape);
  }
  DType ct = t == DType::F64 ? DType::F64 : DType::F32;
  std::string lit;
  if (ct == DType::F64) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    lit = hex_bits(bits, 16);
  } else {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    lit = hex_bits(bits, 8);
  }
  Type st{ct, {}};
  Value c = emit1("stablehlo.constant", {}, st, "value = dense<" + lit + "> : " + st.str());
  c = convert(c, t);
  return shape.empty() ? c : broadcast_in_dim(c, shape, {});
}

Value Builder::constant_int(int64_t v, DType t, const Shape& shape) {
  if (is_float(t) || is_complex(t)) return constant(static_cast<double>(v), t, shape);
  Type st{t, {}};
  std::string lit;
  if (t == DType::Pred) lit = v ? "true" : "false";
  else if (is_unsigned(t)) lit = std::to_string(static_cast<uint64_t>(v));
  else lit = std::to_string(v);
  Value c = emit1("stablehlo.constant", {}, st, "value = dense<" + lit + "> : " + st.str());
  return shape.empty() ? c : broadcast_in_dim(c, shape, {});
}

Value Builder::iota(const Type& t, int64_t dim) {
  return emit1("stablehlo.iota", {}, t, "iota_dimension = " + std::to_string(dim) + " : i64");
}

// ---- elementwise ---------------------------------------------------------------

Value Builder::unary(const std::string& op, Value x) {
  Type rt = x.type;
  if (op == "stablehlo.is_finite") rt.dtype = DType::Pred;
  if (op == "stablehlo.abs") rt.dtype = real_dtype(rt.dtype);  // |complex| is real
  return emit1(op, {x}, rt);
}

Value Builder::binary(const std::string& op, Value a, Value b) {
  if (a.type != b.type)
    throw BuildError(op + ": operand types differ: " + a.type.str() + " vs " + b.type.str());
  return emit1(op, {a, b}, a.type);
}

Value Builder::compare(Value a, Value b, Cmp dir, bool total_order) {
  if (a.type != b.type)
    throw BuildError("compare: operand types differ: " + a.type.str() + " vs " + b.type.str());
  static const char* names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  const char* ct = is_complex(a.dtype()) ? "FLOAT"
                   : is_float(a.dtype()) ? (total_order ? "TOTALORDER" : "FLOAT")
                   : is_unsigned(a.dtype()) || a.dtype() == DType::Pred ? "UNSIGNED"
                                                                        : "SIGNED";
  std::string attrs = std::string("comparison_direction = #stablehlo<comparison_direction ") +
                      names[static_cast<int>(dir)] + ">, compare_type = #stablehlo<comparison_type " +
                      ct + ">";
  return emit1("stablehlo.compare", {a, b}, Type{DType::Pred, a.shape()}, attrs);
}

Value Builder::select(Value pred, Value on_true, Value on_false) {
  if (on_true.type != on_false.type)
    throw BuildError("select: branch types differ: " + on_true.type.str() + " vs " + on_false.type.str());
  return emit1("stablehlo.select", {pred, on_true, on_false}, on_true.type);
}

Value Builder::clamp(Value lo, Value x, Value hi) {
  return emit1("stablehlo.clamp", {lo, x, hi}, x.type);
}

Value Builder::convert(Value x, DType t) {
  if (x.dtype() == t) return x;
  if (is_complex(x.dtype()) && !is_complex(t)) {
    if (t != DType::Pred) return convert(real(x), t);
    Value zero = constant(0, real_dtype(x.dtype()), x.shape());
    return or_(compare(real(x), zero, Cmp::NE), compare(imag(x), zero, Cmp::NE));
  }
  // Bool and integers reach complex through their float value.
  if (is_complex(t) && !is_float(x.dtype()) && !is_complex(x.dtype())) x = convert(x, real_dtype(t));
  return emit1("stablehlo.convert", {x}, Type{t, x.shape()});
}

Value Builder::real(Value x) {
  if (!is_complex(x.dtype())) return x;
  return emit1("stablehlo.real", {x}, Type{real_dtype(x.dtype()), x.shape()});
}

Value Builder::imag(Value x) {
  if (!is_complex(x.dtype())) return constant(0, x.dtype(), x.shape());
  return emit1("stablehlo.imag", {x}, Type{real_dtype(x.dtype()), x.shape()});
}

Value Builder::complex(Value re, Value im) {
  if (re.type != im.type || !is_float(re.dtype()))
    throw BuildError("complex: parts must have one float type: " + re.type.str() + " vs " + im.type.str());
  return emit1("stablehlo.complex", {re, im}, Type{complex_dtype(re.dtype()), re.shape()});
}

Value Builder::bitcast_convert(Value x, DType t) {
  if (x.dtype() == t) return x;
  return emit1("stablehlo.bitcast_convert", {x}, Type{t, x.shape()});
}

// ---- shapes ------------------------------------------------------------------------

Value Builder::reshape(Value x, const Shape& shape) {
  if (x.shape() == shape) return x;
  Type t{x.dtype(), shape};
  if (t.numel() != x.type.numel())
    throw BuildError("reshape: " + x.type.str() + " to " + t.str() + " changes the element count");
  return emit1("stablehlo.reshape", {x}, t);
}

Value Builder::broadcast_in_dim(Value x, const Shape& shape, const std::vector<int64_t>& dims) {
  if (static_cast<int64_t>(dims.size()) != x.rank())
    throw BuildError("broadcast_in_dim: dims do not match operand rank");
  return emit1("stablehlo.broadcast_in_dim", {x}, Type{x.dtype(), shape},
               "broadcast_dimensions = " + i64_array(dims));
}

Value Builder::broadcast_to(Value x, const Shape& shape) {
  if (x.shape() == shape) return x;
  int64_t off = static_cast<int64_t>(shape.size()) - x.rank();
  if (off < 0) throw BuildError("broadcast_to: cannot broadcast " + x.type.str() + " to a lower rank");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t d = x.shape()[i];
    if (d != 1 && d != shape[off + i])
      throw BuildError("broadcast_to: " + x.type.str() + " is not broadcastable to " +
                       Type{x.dtype(), shape}.str());
    dims.push_back(off + i);
  }
  // Size-1 dims that broadcast must be dropped first: broadcast_in_dim maps
  // them fine (1 -> n is allowed), so nothing else to do.
  return broadcast_in_dim(x, shape, dims);
}

Value Builder::transpose(Value x, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  Shape s;
  for (auto p : perm) s.push_back(x.shape()[p]);
  return emit1("stablehlo.transpose", {x}, Type{x.dtype(), s}, "permutation = " + i64_array(perm));
}

Value Builder::slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                     const std::vector<int64_t>& strides_in) {
  std::vector<int64_t> strides = strides_in;
  if (strides.empty()) strides.assign(start.size(), 1);
  Shape s;
  bool whole = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    s.push_back(n);
    whole &= start[i] == 0 && limit[i] == x.shape()[i] && strides[i] == 1;
  }
  if (whole) return x;
  return emit1("stablehlo.slice", {x}, Type{x.dtype(), s},
               "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                   ", strides = " + i64_array(strides));
}

Value Builder::dynamic_slice(Value x, const Values& starts, const std::vector<int64_t>& sizes) {
  Values ops{x};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return emit1("stablehlo.dynamic_slice", ops, Type{x.dtype(), sizes}, "slice_sizes = " + i64_array(sizes));
}

Value Builder::dynamic_update_slice(Value x, Value update, const Values& starts) {
  Values ops{x, update};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return emit1("stablehlo.dynamic_update_slice", ops, x.type);
}

Value Builder::concatenate(const Values& xs, int64_t dim) {
  if (xs.empty()) throw BuildError("concatenate: no operands");
  if (xs.size() == 1) return xs[0];
  Shape s = xs[0].shape();
  s[dim] = 0;
  for (const auto& x : xs) s[dim] += x.shape()[dim];
  return emit1("stablehlo.concatenate", xs, Type{xs[0].dtype(), s},
               "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::pad(Value x, Value pad_value, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  Shape s;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t n = x.shape()[i];
    s.push_back(low[i] + high[i] + n + (n > 0 ? (n - 1) * interior[i] : 0));
  }
  return emit1("stablehlo.pad", {x, pad_value}, Type{x.dtype(), s},
               "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                   ", interior_padding = " + i64_array(interior));
}

Value Builder::reverse(Value x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;
  return emit1("stablehlo.reverse", {x}, x.type, "dimensions = " + i64_array(dims));
}

// ---- reductions ------------------------------------------------------------------------

// A reducer region's arguments: one 0-d accumulator per operand, then one 0-d
// element per operand (stablehlo.reduce and reduce_window alike).
static std::vector<Type> reducer_arg_types(const Values& xs) {
  std::vector<Type> args;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& x : xs) args.push_back(Type{x.dtype(), {}});
  return args;
}

Values Builder::reduce(const Values& xs, const Values& inits, const std::vector<int64_t>& dims,
                       const Body& body) {
  std::vector<Type> result_types;
  for (const auto& x : xs) {
    Shape s;
    for (int64_t i = 0; i < x.rank(); ++i) {
      bool reduced = false;
      for (auto d : dims) reduced |= d == i;
      if (!reduced) s.push_back(x.shape()[i]);
    }
    result_types.push_back(Type{x.dtype(), s});
  }
  std::string r = region(reducer_arg_types(xs), body);
  Values ops = xs;
  ops.insert(ops.end(), inits.begin(), inits.end());
  return emit("stablehlo.reduce", ops, result_types, "dimensions = " + i64_array(dims), {r});
}

Value Builder::reduce(Value x, Value init, const std::vector<int64_t>& dims, const std::string& op) {
  return reduce(Values{x}, Values{init}, dims, [op](Builder& b, const Values& a) {
    return Values{b.binary(op, a[0], a[1])};
  })[0];
}

static std::string padding_attr(const std::vector<std::pair<int64_t, int64_t>>& padding) {
  std::string s = "dense<[";
  for (size_t i = 0; i < padding.size(); ++i)
    s += (i ? ", " : "") + std::string("[") + std::to_string(padding[i].first) + ", " +
         std::to_string(padding[i].second) + "]";
  s += "]> : tensor<" + std::to_string(padding.size()) + "x2xi64>";
  if (padding.empty()) s = "dense<> : tensor<0x2xi64>";
  return s;
}

Values Builder::reduce_window(const Values& xs, const Values& inits,
                              const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& base_dilations,
                              const std::vector<int64_t>& window_dilations,
                              const std::vector<std::pair<int64_t, int64_t>>& padding,
                              const Body& body) {
  std::vector<Type> result_types;
  for (const auto& x : xs) {
    Shape s;
    for (int64_t i = 0; i < x.rank(); ++i) {
      int64_t n = x.shape()[i];
      int64_t dilated = n > 0 ? (n - 1) * base_dilations[i] + 1 : 0;
      int64_t padded = dilated + padding[i].first + padding[i].second;
      int64_t wdil = (window[i] - 1) * window_dilations[i] + 1;
      s.push_back(padded < wdil ? 0 : (padded - wdil) / strides[i] + 1);
    }
    result_types.push_back(Type{x.dtype(), s});
  }
  std::string r = region(reducer_arg_types(xs), body);
  Values ops = xs;
  ops.insert(ops.end(), inits.begin(), inits.end());
  std::string attrs = "window_dimensions = " + i64_array(window) +
                      ", window_strides = " + i64_array(strides) +
                      ", base_dilations = " + i64_array(base_dilations) +
                      ", window_dilations = " + i64_array(window_dilations) +
                      ", padding = " + padding_attr(padding);
  return emit("stablehlo.reduce_window", ops, result_types, attrs, {r});
}

Values Builder::sort(const Values& xs, int64_t dim, bool stable, const Body& comparator) {
  std::vector<Type> arg_types, result_types;
  for (const auto& x : xs) {
    arg_types.push_back(Type{x.dtype(), {}});
    arg_types.push_back(Type{x.dtype(), {}});
    result_types.push_back(x.type);
  }
  std::string r = region(arg_types, comparator);
  return emit("stablehlo.sort", xs, result_types,
              "dimension = " + std::to_string(dim) + " : i64, is_stable = " + (stable ? "true" : "false"),
              {r});
}

// ---- control flow ---------------------------------------------------------------------

Values Builder::while_loop(const Values& state, const Body& cond, const Body& body) {
  std::vector<Type> types;
  for (const auto& v : state) types.push_back(v.type);
  std::string c = region(types, [&](Builder& b, const Values& args) {
    Values r = cond(b, args);
    if (r.size() != 1 || r[0].dtype() != DType::Pred || r[0].rank() != 0)
      throw BuildError("stablehlo.while: the condition must return one 0-d i1");
    return r;
  });
  std::string bd = region(types, [&](Builder& b, const Values& args) {
    Values r = body(b, args);
    if (r.size() != types.size()) throw BuildError("stablehlo.while: the body must return the whole state");
    for (size_t i = 0; i < r.size(); ++i)
      if (r[i].type.str() != types[i].str())
        throw BuildError("stablehlo.while: state " + std::to_string(i) + " changes type from " +
                         types[i].str() + " to " + r[i].type.str());
    return r;
  });
  return emit("stablehlo.while", state, types, "", {c, bd});
}

// ---- linear algebra -----------------------------------------------------------------

Value Builder::dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                           const std::vector<int64_t>& rhs_batch,
                           const std::vector<int64_t>& lhs_contract,
                           const std::vector<int64_t>& rhs_contract, DType result,
                           const std::string& precision) {
  auto contains = [](const std::vector<int64_t>& v, int64_t x) {
    for (auto y : v) if (y == x) return true;
    return false;
  };
  Shape s;
  for (auto d : lhs_batch) s.push_back(lhs.shape()[d]);
  for (int64_t i = 0; i < lhs.rank(); ++i)
    if (!contains(lhs_batch, i) && !contains(lhs_contract, i)) s.push_back(lhs.shape()[i]);
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (!contains(rhs_batch, i) && !contains(rhs_contract, i)) s.push_back(rhs.shape()[i]);
  std::string attrs = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                      i64_list(lhs_batch) + ", rhs_batching_dimensions = " + i64_list(rhs_batch) +
                      ", lhs_contracting_dimensions = " + i64_list(lhs_contract) +
                      ", rhs_contracting_dimensions = " + i64_list(rhs_contract) +
                      ">, precision_config = [#stablehlo<precision " + precision +
                      ">, #stablehlo<precision " + precision + ">]";
  return emit1("stablehlo.dot_general", {lhs, rhs}, Type{result, s}, attrs);
}

Value Builder::convolution(Value lhs, Value rhs, const Shape& out_shape, const ConvDims& dn,
                           const std::vector<int64_t>& strides,
                           const std::vector<std::pair<int64_t, int64_t>>& padding,
                           const std::vector<int64_t>& lhs_dilation,
                           const std::vector<int64_t>& rhs_dilation, int64_t feature_groups,
                           int64_t batch_groups, DType result, const std::string& precision) {
  // #stablehlo.conv<raw ...> spells every dimension number explicitly, so any
  // layout can be expressed without the compact [b, f, 0, 1] notation.
  std::string d = "#stablehlo.conv<raw input_batch_dimension = " + std::to_string(dn.in_batch) +
                  ", input_feature_dimension = " + std::to_string(dn.in_feature) +
                  ", input_spatial_dimensions = " + i64_list(dn.in_spatial) +
                  ", kernel_input_feature_dimension = " + std::to_string(dn.k_in) +
                  ", kernel_output_feature_dimension = " + std::to_string(dn.k_out) +
                  ", kernel_spatial_dimensions = " + i64_list(dn.k_spatial) +
                  ", output_batch_dimension = " + std::to_string(dn.out_batch) +
                  ", output_feature_dimension = " + std::to_string(dn.out_feature) +
                  ", output_spatial_dimensions = " + i64_list(dn.out_spatial) + ">";
  std::string attrs = "batch_group_count = " + std::to_string(batch_groups) +
                      " : i64, dimension_numbers = " + d +
                      ", feature_group_count = " + std::to_string(feature_groups) +
                      " : i64, lhs_dilation = " + i64_array(lhs_dilation) +
                      ", padding = " + padding_attr(padding) +
                      ", rhs_dilation = " + i64_array(rhs_dilation) +
                      ", window_strides = " + i64_array(strides);
  if (!precision.empty())
    attrs += ", precision_config = [#stablehlo<precision " + precision + ">, #stablehlo<precision " + precision + ">]";
  return emit1("stablehlo.convolution", {lhs, rhs}, Type{result, out_shape}, attrs);
}

// ---- gather / scatter ---------------------------------------------------------------------

Value Builder::gather(Value operand, Value indices, const GatherDims& dn,
                      const std::vector<int64_t>& slice_sizes, const Shape& out_shape) {
  std::string d = "#stablehlo.gather<offset_dims = " + i64_list(dn.offset_dims) +
                  ", collapsed_slice_dims = " + i64_list(dn.collapsed_slice_dims);
  if (!dn.operand_batching_dims.empty())
    d += ", operand_batching_dims = " + i64_list(dn.operand_batching_dims) +
         ", start_indices_batching_dims = " + i64_list(dn.start_indices_batching_dims);
  d += ", start_index_map = " + i64_list(dn.start_index_map) +
       ", index_vector_dim = " + std::to_string(dn.index_vector_dim) + ">";
  return emit1("stablehlo.gather", {operand, indices}, Type{operand.dtype(), out_shape},
               "dimension_numbers = " + d + ", indices_are_sorted = false, slice_sizes = " +
                   i64_array(slice_sizes));
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& dn,
                       const Body& combine) {
  Type st{operand.dtype(), {}};
  Body body = combine ? combine : [](Builder&, const Values& a) { return Values{a[1]}; };
  std::string r = region({st, st}, body);
  std::string d = "#stablehlo.scatter<update_window_dims = " + i64_list(dn.update_window_dims) +
                  ", inserted_window_dims = " + i64_list(dn.inserted_window_dims);
  if (!dn.input_batching_dims.empty())
    d += ", input_batching_dims = " + i64_list(dn.input_batching_dims) +
         ", scatter_indices_batching_dims = " + i64_list(dn.scatter_indices_batching_dims);
  d += ", scatter_dims_to_operand_dims = " + i64_list(dn.scatter_dims_to_operand_dims) +
       ", index_vector_dim = " + std::to_string(dn.index_vector_dim) + ">";
  return emit1("stablehlo.scatter", {operand, indices, updates}, operand.type,
               "indices_are_sorted = false, scatter_dimension_numbers = " + d +
                   ", unique_indices = false",
               {r});
}

}  // namespace tt::hlo
