#include "lowering/rule_call.h"

namespace tt::lowering {
namespace {

std::string describe_value(const Value& v) {
  return v.valid() ? std::string(hlo::mlir_name(v.dtype())) + hlo::i64_list(v.shape()) : "None";
}

std::string describe_arg(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::None: return "None";
    case Arg::Kind::Tensor: return describe_value(a.tensor);
    case Arg::Kind::Scalar: return "scalar";
    case Arg::Kind::TensorList: {
      std::string s = "[";
      for (size_t i = 0; i < a.tensors.size(); ++i) s += (i ? ", " : "") + describe_value(a.tensors[i]);
      return s + "]";
    }
    case Arg::Kind::Int: return std::to_string(a.i);
    case Arg::Kind::Double: return std::to_string(a.d);
    case Arg::Kind::Bool: return a.b ? "True" : "False";
    case Arg::Kind::IntList: return hlo::i64_list(a.ints);
    case Arg::Kind::DoubleList: return "[" + std::to_string(a.doubles.size()) + " floats]";
    case Arg::Kind::BoolList: return "[" + std::to_string(a.bools.size()) + " bools]";
    case Arg::Kind::String: return "'" + a.s + "'";
  }
  return "?";
}

[[noreturn]] void broken(const Context& ctx, const Args& args, const std::string& why) {
  throw RuleContractError("tpu lowering of " + ctx.op + " for (" + describe_args(args) + ") " + why);
}

}  // namespace

std::string describe_args(const Args& args) {
  std::string s;
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + describe_arg(args[i]);
  return s;
}

Values call_rule(Builder& b, const Rule& rule, const Args& args, const Context& ctx, const std::vector<bool>& masked,
                 bool checked) {
  Values results = rule.fn(b, args, ctx);
  if (!checked) return results;
  const std::vector<Type>& want = ctx.out_types;
  if (results.size() != want.size())
    broken(ctx, args, "returned " + std::to_string(results.size()) + " results; PyTorch expects " +
                          std::to_string(want.size()));
  for (size_t k = 0; k < results.size(); ++k) {
    if (k < masked.size() && masked[k]) {
      results[k] = Value{};
      continue;
    }
    if (!results[k].valid()) broken(ctx, args, "gave no value for result " + std::to_string(k));
    if (results[k].shape() != want[k].shape)
      broken(ctx, args, "produced shape " + hlo::i64_list(results[k].shape()) + " for result " + std::to_string(k) +
                            "; PyTorch expects " + hlo::i64_list(want[k].shape));
    results[k] = b.convert(results[k], want[k].dtype);
  }
  return results;
}

}  // namespace tt::lowering
