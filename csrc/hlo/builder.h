// torch_tpu hlo layer: a StableHLO builder that emits MLIR text.
// Knows nothing of PyTorch or PJRT.
//
// A Builder holds one function, `main`. Values are SSA names with a static
// type. Ops are emitted in MLIR's generic form ("stablehlo.add"(...) : ...),
// which every StableHLO version parses the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tt::hlo {

// Element types. The numbering equals PJRT_Buffer_Type so that the backend can
// convert with a cast; this layer itself does not depend on that.
enum class DType : int32_t {
  Pred = 1, S8 = 2, S16 = 3, S32 = 4, S64 = 5, U8 = 6, U16 = 7, U32 = 8,
  U64 = 9, F16 = 10, F32 = 11, F64 = 12, BF16 = 13, C64 = 14, C128 = 15,
  F8E5M2 = 16, F8E4M3FN = 17,  // storage and conversions only (PyTorch computes nothing in float8)
};
const char* mlir_name(DType t);  // i1, i8, ..., ui8, f16, bf16, f32, f64, f8E5M2, f8E4M3FN, complex<f32>
bool is_float(DType t);     // real floating point (not complex)
bool is_complex(DType t);   // C64 (complex<f32>) or C128 (complex<f64>)
bool is_int(DType t);       // signed or unsigned integer, not Pred
// C64 -> F32, C128 -> F64; other types unchanged.
DType real_dtype(DType t);
// The complex type whose parts are `t`: F64 -> C128, other floats -> C64
// (PyTorch has no complex bf16/f16 compute here); complex types unchanged.
DType complex_dtype(DType t);
bool is_unsigned(DType t);  // U8..U64
int bit_width(DType t);     // Pred counts as 1

using Shape = std::vector<int64_t>;

struct Type {
  DType dtype = DType::F32;
  Shape shape;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  std::string str() const;  // tensor<2x3xf32>
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

class Builder;

// An SSA value inside one Builder.
struct Value {
  int id = -1;
  Type type;
  bool valid() const { return id >= 0; }
  std::string name() const { return "%v" + std::to_string(id); }
  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }
  int64_t rank() const { return type.rank(); }
};
using Values = std::vector<Value>;

// Thrown when an op is built with operands that cannot be valid (the message
// names the op). Lowering turns it into the user-facing error.
class BuildError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Cmp { EQ, NE, LT, LE, GT, GE };

// A region body: given the block arguments, returns the values to return.
using Body = std::function<Values(Builder&, const Values& args)>;

class Builder {
 public:
  Builder();

  // ---- function signature -------------------------------------------------
  Value param(const Type& t);
  void set_results(const Values& results);
  // Parameter `param` (its number among params) may be donated: its buffer
  // becomes result `result`, which must have the same type
  // (tf.aliasing_output; XLA then updates it in place).
  void alias_param(int param, int result);
  const std::vector<Type>& param_types() const { return params_; }
  // The whole module as text, ready for PJRT_Client_Compile (format "mlir").
  std::string module_text() const;
  // mhlo.num_replicas of the module (1 unless set): a program of N replicas
  // runs once per device of its device assignment (collectives.cpp ops).
  void set_num_replicas(int n);
  int num_replicas() const { return num_replicas_; }
  // A private function emitted into the module after `main` (MLIR text of
  // one or more `func.func private` ops, whose symbols the caller made
  // unique). Added once per `symbol`: a second add with the same symbol is a
  // no-op, so several calls of one kernel share its functions.
  void add_function(const std::string& symbol, const std::string& text);
  // func.call of a function added with add_function.
  Values call(const std::string& symbol, const Values& args, const std::vector<Type>& results);

  // ---- generic emission -----------------------------------------------------
  // Emits `results = "op"(operands) ({regions}) {attrs} : (types) -> (types)`.
  Values emit(const std::string& op, const Values& operands,
              const std::vector<Type>& result_types, const std::string& attrs = "",
              const std::vector<std::string>& regions = {});
  Value emit1(const std::string& op, const Values& operands, const Type& result,
              const std::string& attrs = "", const std::vector<std::string>& regions = {});
  // Builds a region whose block takes `arg_types`; returns its text.
  std::string region(const std::vector<Type>& arg_types, const Body& body);

  // ---- constants --------------------------------------------------------------
  // A constant of dtype `t` broadcast to `shape`. Floats are exact for f32 and
  // f64; f16/bf16 are rounded from f32 by a convert (round to nearest even).
  Value constant(double v, DType t, const Shape& shape = {});
  Value constant_int(int64_t v, DType t, const Shape& shape = {});
  Value iota(const Type& t, int64_t dim);

  // ---- elementwise ---------------------------------------------------------
  Value unary(const std::string& op, Value x);             // "stablehlo.exponential", "chlo.erf", ...
  Value binary(const std::string& op, Value a, Value b);   // same shapes and dtypes
  Value add(Value a, Value b) { return binary("stablehlo.add", a, b); }
  Value sub(Value a, Value b) { return binary("stablehlo.subtract", a, b); }
  Value mul(Value a, Value b) { return binary("stablehlo.multiply", a, b); }
  Value div(Value a, Value b) { return binary("stablehlo.divide", a, b); }
  Value max(Value a, Value b) { return binary("stablehlo.maximum", a, b); }
  Value min(Value a, Value b) { return binary("stablehlo.minimum", a, b); }
  Value and_(Value a, Value b) { return binary("stablehlo.and", a, b); }
  Value or_(Value a, Value b) { return binary("stablehlo.or", a, b); }
  Value neg(Value a) { return unary("stablehlo.negate", a); }
  Value exp(Value a) { return unary("stablehlo.exponential", a); }
  Value log(Value a) { return unary("stablehlo.log", a); }
  Value sqrt(Value a) { return unary("stablehlo.sqrt", a); }
  Value rsqrt(Value a) { return unary("stablehlo.rsqrt", a); }
  Value tanh(Value a) { return unary("stablehlo.tanh", a); }
  Value abs(Value a) { return unary("stablehlo.abs", a); }
  Value not_(Value a) { return unary("stablehlo.not", a); }
  // Comparison; the compare type is chosen from the dtype (FLOAT, SIGNED,
  // UNSIGNED), or TOTALORDER for floats when `total_order`.
  Value compare(Value a, Value b, Cmp dir, bool total_order = false);
  Value select(Value pred, Value on_true, Value on_false);
  Value clamp(Value lo, Value x, Value hi);
  // No-op when already `t`. Complex to real keeps the real part (PyTorch's
  // cast); complex to bool is "either part non-zero".
  Value convert(Value x, DType t);
  // Complex parts and assembly: real/imag of a complex value (a real value's
  // real part is itself, its imag zero); complex(re, im) of equal float types.
  Value real(Value x);
  Value imag(Value x);
  Value complex(Value re, Value im);
  Value bitcast_convert(Value x, DType t);  // same bit width, neither complex

  // ---- shapes ----------------------------------------------------------------
  Value reshape(Value x, const Shape& shape);  // no-op when already `shape`
  Value broadcast_in_dim(Value x, const Shape& shape, const std::vector<int64_t>& dims);
  // Numpy-style broadcast of `x` to `shape` (trailing alignment).
  Value broadcast_to(Value x, const Shape& shape);
  Value transpose(Value x, const std::vector<int64_t>& perm);
  Value slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides = {});
  Value dynamic_slice(Value x, const Values& starts, const std::vector<int64_t>& sizes);
  Value dynamic_update_slice(Value x, Value update, const Values& starts);
  Value concatenate(const Values& xs, int64_t dim);
  Value pad(Value x, Value pad_value, const std::vector<int64_t>& low,
            const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
  Value reverse(Value x, const std::vector<int64_t>& dims);

  // ---- reductions and friends ------------------------------------------------
  // Reduces each operand over `dims` with `body` (args: accumulators then
  // elements, as scalars), starting from `inits` (0-d values).
  Values reduce(const Values& xs, const Values& inits, const std::vector<int64_t>& dims,
                const Body& body);
  // Single-operand reduce with a binary op name ("stablehlo.add", ...).
  Value reduce(Value x, Value init, const std::vector<int64_t>& dims, const std::string& op);
  Values reduce_window(const Values& xs, const Values& inits,
                       const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                       const std::vector<int64_t>& base_dilations,
                       const std::vector<int64_t>& window_dilations,
                       const std::vector<std::pair<int64_t, int64_t>>& padding,
                       const Body& body);
  // Sorts along `dim`; `comparator` gets 2 scalars per operand (lhs_i, rhs_i).
  Values sort(const Values& xs, int64_t dim, bool stable, const Body& comparator);

  // ---- control flow ------------------------------------------------------------
  // stablehlo.while: `state` is the loop-carried tuple; `cond` gets the state
  // and returns one 0-d i1; `body` gets the state and returns the next state
  // (same types). The regions see only their arguments: carry anything the
  // loop reads through `state` (a value from outside the loop is not in scope).
  Values while_loop(const Values& state, const Body& cond, const Body& body);

  // ---- linear algebra ---------------------------------------------------------
  Value dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch,
                    const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract, DType result,
                    const std::string& precision = "DEFAULT");
  struct ConvDims {
    int64_t in_batch, in_feature; std::vector<int64_t> in_spatial;
    int64_t k_out, k_in; std::vector<int64_t> k_spatial;
    int64_t out_batch, out_feature; std::vector<int64_t> out_spatial;
  };
  Value convolution(Value lhs, Value rhs, const Shape& out_shape, const ConvDims& dn,
                    const std::vector<int64_t>& strides,
                    const std::vector<std::pair<int64_t, int64_t>>& padding,
                    const std::vector<int64_t>& lhs_dilation,
                    const std::vector<int64_t>& rhs_dilation, int64_t feature_groups,
                    int64_t batch_groups, DType result, const std::string& precision = "");

  // ---- gather / scatter ----------------------------------------------------------
  struct GatherDims {
    std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
    std::vector<int64_t> operand_batching_dims, start_indices_batching_dims;
    int64_t index_vector_dim = 0;
  };
  Value gather(Value operand, Value indices, const GatherDims& dn,
               const std::vector<int64_t>& slice_sizes, const Shape& out_shape);
  struct ScatterDims {
    std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
    std::vector<int64_t> input_batching_dims, scatter_indices_batching_dims;
    int64_t index_vector_dim = 0;
  };
  // `combine` gets (current, update) scalars and returns the new value; an
  // empty Body means "replace".
  Value scatter(Value operand, Value indices, Value updates, const ScatterDims& dn,
                const Body& combine = nullptr);

  // ---- collectives across replicas (collectives.cpp) --------------------------
  // `groups` partitions the replica ids (each row one group, rows of equal
  // length); `channel` > 0 adds a channel_handle (type 1, device to device),
  // 0 leaves it out (cross-replica). Reductions take a binary op name
  // ("stablehlo.add", "stablehlo.multiply", "stablehlo.minimum", ...).
  using Groups = std::vector<std::vector<int64_t>>;
  Value all_reduce(Value x, const std::string& op, const Groups& groups, int64_t channel = 0);
  // Concatenates the group's operands along `dim` (result dim = size * group).
  Value all_gather(Value x, int64_t dim, const Groups& groups, int64_t channel = 0);
  // Reduces across the group, then replica k keeps block k of `dim`
  // (dim size must divide by the group size).
  Value reduce_scatter(Value x, int64_t dim, const std::string& op, const Groups& groups,
                       int64_t channel = 0);
  // Splits `split_dim` into group-size blocks, sends block k to the group's
  // k-th replica and concatenates what arrives along `concat_dim`.
  Value all_to_all(Value x, int64_t split_dim, int64_t concat_dim, const Groups& groups,
                   int64_t channel = 0);
  // Replica `pairs[i].first` sends its operand to `pairs[i].second`; a
  // replica that receives nothing gets zeros. With a channel (> 0) the pairs
  // name partitions instead (SPMD programs, num_partitions = N).
  Value collective_permute(Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                           int64_t channel = 0);

 private:
  Value fresh(const Type& t);
  void line(const std::string& s);
  int next_id_ = 0;
  int num_replicas_ = 1;
  std::vector<Type> params_;
  std::vector<int> param_ids_;
  std::vector<std::pair<int, int>> aliases_;  // (param, result)
  std::vector<std::pair<std::string, std::string>> functions_;  // (symbol, text)
  Values results_;
  std::vector<std::vector<std::string>> blocks_;  // stack: body lines being built
};

// Helpers for attribute text.
std::string i64_array(const std::vector<int64_t>& v);  // array<i64: 1, 2>
std::string i64_list(const std::vector<int64_t>& v);   // [1, 2]

}  // namespace tt::hlo
