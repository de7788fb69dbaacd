// torch_tpu lowering layer: one rule per ATen operator.
//
// A rule receives the StableHLO builder, the operator's arguments in schema
// order (tensors already read into logical values, non-tensor arguments as
// plain C++ values) and a context holding the expected result types. It emits
// the op and returns the results in the order of the functional schema's
// returns (a Tensor[] return is flattened). Knows ATen schemas, not storages,
// and includes no PyTorch header.
//
// Rules are registered under the *functional* overload name
// ("aten::add.Tensor"); the backend derives the in-place ("aten::add_.Tensor")
// and out= ("aten::add.out") forms itself, so one rule serves all three, and
// eager, fused eager and torch.compile alike.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/builder.h"

namespace tt::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Shape;
using hlo::Type;
using hlo::Value;
using hlo::Values;

// The host side of one argument of an ATen op: its kind and every
// non-tensor value. The one description that an eager call's record
// (backend::ArgRecord), a graph node's argument (GraphArg) and the rule's
// Arg share; each adds only where a tensor's value comes from.
struct HostArg {
  enum class Kind { None, Tensor, TensorList, Scalar, Int, Double, Bool, IntList, DoubleList, BoolList, String };
  Kind kind = Kind::None;
  // Tensor: a Python number that PyTorch wrapped into a 0-d tensor; it
  // promotes like a Scalar.
  bool wrapped = false;
  // Scalar: its Python category (f64, i64 or i1). Its host value is in
  // d / i / b too, usable only by rules flagged static_scalars (a Scalar is
  // otherwise a runtime value, so that a changing scalar does not recompile).
  DType scalar_kind = DType::F64;
  int64_t i = 0;
  double d = 0.0;
  double imag = 0.0;  // a complex Scalar (scalar_kind C128): its imaginary part; d is its real part
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<bool> bools;
  std::string s;
};

// One argument of an ATen op as a rule sees it: the host fields, and the
// values inside the program being built.
struct Arg : HostArg {
  // Tensor: the logical value; Scalar: its 0-d runtime value.
  Value tensor;
  // Tensor: whether PyTorch sees it as contiguous. Eager calls know the
  // view's strides; inside a whole graph it is assumed. Only for the rare op
  // whose results PyTorch defines by strides (det's LU of A or of A^T).
  bool contiguous = true;
  // TensorList (a `Tensor?[]` entry that is None is an invalid Value).
  Values tensors;

  Arg() = default;
  explicit Arg(const HostArg& host) : HostArg(host) {}

  bool is_none() const { return kind == Kind::None; }
  bool is_tensor() const { return kind == Kind::Tensor; }
  // Tensor or Scalar: the value to compute with.
  const Value& value() const { return tensor; }
};
using Args = std::vector<Arg>;

// A data-dependent check computed on the device (lowering/device_check.h):
// the exception PyTorch's CPU kernel raises for the bad datum, and its
// message, where "{}" stands for the offending value.
enum class CheckError { Index, Runtime, Value };
struct CheckInfo {
  CheckError error = CheckError::Runtime;
  std::string message;
};
struct DeviceCheck {
  CheckInfo info;
  Value bad;    // 0-d i1: the data are bad
  Value value;  // 0-d s64: the offending value
};

struct Context {
  std::string op;                 // the functional overload, "aten::add.Tensor"
  std::vector<Type> out_types;    // expected results (from PyTorch's meta kernels)
  // Where rules record their device checks; null when checks are off.
  std::vector<DeviceCheck>* checks = nullptr;
  // Counter-based RNG state for rules registered with needs_rng: a 0-d ui64
  // seed and a 0-d ui64 offset (the generator's counter before this op).
  Value rng_seed, rng_offset;
  // Where a rule records (tensor operand, result) pairs it asks to donate:
  // the operand's buffer may become that result's (external_op.h). The
  // n-th tensor operand counts Tensor arguments and TensorList elements in
  // schema order. Null where nothing is donated (graphs, fused clusters).
  std::vector<std::pair<int, int>>* donations = nullptr;
  const Type& out(size_t i = 0) const;  // throws when the type is unknown
};

using RuleFn = std::function<Values(Builder&, const Args&, const Context&)>;

struct Rule {
  RuleFn fn;
  // The op draws random numbers: the context carries rng_seed/rng_offset and
  // the generator advances by the element count of the results.
  bool needs_rng = false;
  // The op's result shapes depend on its Scalar values (arange): Scalars are
  // then part of the cache key and rules may read their host values (Arg::d,
  // Arg::i, Arg::b). Otherwise only the runtime Value may be used.
  bool static_scalars = false;
  // Only for whole-graph lowering (torch.compile, fused eager): view ops and
  // factories that eager mode handles without a program (views alias
  // storage; factories are empty + fill_). The eager executor never
  // registers these.
  bool graph_only = false;
  // Where the rule is written, "csrc/lowering/ops/arithmetic.cpp:42"
  // (torch_tpu.lowered_ops(where=True)).
  std::string source;
};

// How an op treats padded inputs, for torch.compile's shape buckets
// (torch_tpu/compiler/buckets.py), which pad symbolic sizes up to a bucket:
//   View: the same op applied to a padding mask gives the result's mask;
//   Elementwise: element by element (or by index only, as tril), so padding
//     stays padding (pointwise-tagged ATen ops need no entry);
//   Creation: makes a value from sizes alone, whose prefix is the real result;
//   Fills: reduces or contracts over padded dimensions, so each listed tensor
//     argument's padding is first replaced by the identity given (or by the
//     op's ignore_index).
// Declared with TT_PADDING beside the op's rule.
struct PadFill {
  std::string arg;
  double value = 0.0;
  bool ignore_index = false;
};
struct Padding {
  enum class Kind { View, Elementwise, Creation, Fills };
  Kind kind = Kind::Elementwise;
  std::vector<PadFill> fills;
  static Padding view() { return {Kind::View, {}}; }
  static Padding elementwise() { return {Kind::Elementwise, {}}; }
  static Padding creation() { return {Kind::Creation, {}}; }
  static Padding fill(std::vector<PadFill> fills) { return {Kind::Fills, std::move(fills)}; }
};
void register_padding(const std::string& functional_name, Padding padding);
const Padding* find_padding(const std::string& functional_name);
std::vector<std::string> padded_op_names();

// The table. Registration happens from static initializers in each rule file.
void register_rule(const std::string& functional_name, Rule rule);
const Rule* find_rule(const std::string& functional_name);
// Eager-usable rules; with include_graph_only, also the graph-only ones.
std::vector<std::string> rule_names(bool include_graph_only = false);
// "csrc/...:line" from a compiler's __FILE__ and __LINE__.
std::string source_location(const char* file, int line);

// The registration statements record where they stand (the defaults are
// evaluated at the TT_RULE / TT_GRAPH_RULE that constructs them).
struct Registrar {
  Registrar(std::initializer_list<const char*> names, RuleFn fn, bool needs_rng = false, bool static_scalars = false,
            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    for (const char* n : names)
      register_rule(n, Rule{fn, needs_rng, static_scalars, false, source_location(file, line)});
  }
};

struct GraphRegistrar {
  GraphRegistrar(std::initializer_list<const char*> names, RuleFn fn, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
    for (const char* n : names) register_rule(n, Rule{fn, false, false, true, source_location(file, line)});
  }
};

struct PaddingRegistrar {
  PaddingRegistrar(std::initializer_list<const char*> names, const Padding& p) {
    for (const char* n : names) register_padding(n, p);
  }
};

// Raised by a rule for arguments it cannot lower (the backend turns it into a
// Python exception naming the op).
class LoweringError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised by a rule for arguments PyTorch itself rejects but its meta kernel
// lets through (checks that live in the CPU kernel): a RuntimeError with
// PyTorch's message, never a fallback.
class InvalidArgument : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised by a rule for a dtype PyTorch's CPU kernel does not implement
// (its dispatch macro's "not implemented for 'Half'") but whose meta kernel
// accepts: a NotImplementedError with PyTorch's message, never a fallback.
class NotImplementedForDtype : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tt::lowering

#define TT_CONCAT_INNER(a, b) a##b
#define TT_CONCAT(a, b) TT_CONCAT_INNER(a, b)
// TT_RULE({"aten::neg", ...}, [](Builder& b, const Args& a, const Context& c) {...});
#define TT_RULE(...) static ::tt::lowering::Registrar TT_CONCAT(tt_rule_, __LINE__)(__VA_ARGS__)
// A rule used only inside whole graphs (see Rule::graph_only).
#define TT_GRAPH_RULE(...) static ::tt::lowering::GraphRegistrar TT_CONCAT(tt_graph_rule_, __LINE__)(__VA_ARGS__)
// TT_PADDING({"aten::mm"}, Padding::fill({{"self", 0}, {"mat2", 0}})): see Padding.
#define TT_PADDING(...) static ::tt::lowering::PaddingRegistrar TT_CONCAT(tt_padding_, __LINE__)(__VA_ARGS__)
