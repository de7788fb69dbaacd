// Reductions: sum, nansum, mean, prod, max/min (full and .dim with
// first-occurrence indices), amax/amin, aminmax, argmax/argmin, var/std (and
// var_mean/std_mean), linalg_vector_norm and the legacy norm overloads,
// any/all, count_nonzero, trace, logsumexp, cumsum/cumprod. f16/bf16
// accumulate in f32 as PyTorch's CPU kernels do.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// Errors PyTorch's CPU kernel raises but its meta kernel does not, with the
// CPU's message: a RuntimeError, or (std::out_of_range) an IndexError.
[[noreturn]] void torch_error(const std::string& msg) { throw std::runtime_error(msg); }
[[noreturn]] void index_error(const std::string& msg) { throw std::out_of_range(msg); }

// Reduction dims for a `dim` argument, with the output shape settling the one
// ambiguity: an empty list that PyTorch treats as "no dims" (out shape equals
// the input's) rather than "all dims".
std::vector<int64_t> dims_for(const Arg& dim, Value x, const Type& out) {
  if (dim.kind == Arg::Kind::IntList && dim.ints.empty() && out.shape == x.shape() && x.rank() > 0 &&
      numel(x.shape()) != 1)
    return {};
  return reduction_dims(dim, x.rank());
}

int64_t count_of(Value x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= x.shape()[d];
  return n;
}

// sum / nansum / prod: the input converted to the accumulation dtype of the
// result, reduced, reshaped to the result shape (keepdim).
Value sum_like(Builder& b, Value x, const std::vector<int64_t>& dims, const Type& out, bool prod,
               bool nan_as_zero = false) {
  DType acc = compute_dtype(out.dtype);
  if (prod && acc == DType::Pred) acc = DType::S64;
  x = b.convert(x, acc);
  if (nan_as_zero && hlo::is_float(acc))
    x = b.select(b.compare(x, x, Cmp::NE), full_like(b, x, 0), x);
  Value r = prod ? b.reduce(x, b.constant(1, acc), dims, "stablehlo.multiply") : reduce_sum(b, x, dims);
  return b.reshape(r, out.shape);
}

TT_RULE({"aten::sum", "aten::sum.dim_IntList", "aten::nansum"},
        [](Builder& b, const Args& a, const Context& c) {
          Value x = a[0].value();
          Arg all;
          auto dims = a.size() > 2 ? dims_for(a[1], x, c.out()) : reduction_dims(all, x.rank());
          return Values{sum_like(b, x, dims, c.out(), false, c.op == "aten::nansum")};
        });
TT_PADDING({"aten::sum", "aten::sum.dim_IntList"}, Padding::fill({{"self", 0}}));

TT_RULE({"aten::prod", "aten::prod.dim_int"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  Arg all;
  auto dims = a.size() > 2 ? reduction_dims(a[1], x.rank()) : reduction_dims(all, x.rank());
  return Values{sum_like(b, x, dims, c.out(), true)};
});

TT_RULE({"aten::mean", "aten::mean.dim"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  Arg all;
  auto dims = a.size() > 2 ? dims_for(a[1], x, c.out()) : reduction_dims(all, x.rank());
  DType acc = compute_dtype(c.out().dtype);
  if (!hlo::is_float(acc) && !hlo::is_complex(acc)) throw LoweringError("mean of a non-float result type");
  Value s = reduce_sum(b, b.convert(x, acc), dims);
  s = b.div(s, full_like(b, s, static_cast<double>(count_of(x, dims))));
  return Values{b.reshape(s, c.out().shape)};
});

// ---- max / min with indices -----------------------------------------------------

// Reduces `x` over `dim` to (extreme value, index of its first occurrence);
// NaN wins (first NaN), as in PyTorch.
Values arg_reduce(Builder& b, Value x, int64_t dim, bool for_max) {
  if (x.dtype() == DType::Pred) x = b.convert(x, DType::U8);
  DType t = x.dtype();
  Value idx = b.iota(Type{DType::S64, x.shape()}, dim);
  Value init_v = extreme_identity(b, t, for_max);
  Value init_i = b.constant_int(std::numeric_limits<int64_t>::max(), DType::S64);
  bool fl = hlo::is_float(t);
  return b.reduce({x, idx}, {init_v, init_i}, {dim}, [for_max, fl](Builder& b, const Values& v) {
    Value lv = v[0], li = v[1], rv = v[2], ri = v[3];
    Value lidx_less = b.compare(li, ri, Cmp::LT);
    Value better = b.compare(lv, rv, for_max ? Cmp::GT : Cmp::LT);
    Value tie = b.and_(b.compare(lv, rv, Cmp::EQ), lidx_less);
    Value pick = b.or_(better, tie);
    if (fl) {
      Value lnan = b.compare(lv, lv, Cmp::NE), rnan = b.compare(rv, rv, Cmp::NE);
      Value not_rnan = b.not_(rnan);
      pick = b.select(lnan, b.or_(not_rnan, lidx_less), b.and_(not_rnan, pick));
    }
    return Values{b.select(pick, lv, rv), b.select(pick, li, ri)};
  });
}

TT_RULE({"aten::max", "aten::min"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  bool is_max = c.op == "aten::max";
  if (numel(x.shape()) == 0)
    torch_error(std::string(is_max ? "max" : "min") +
                "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                "dim with the 'dim' argument.");
  Arg all;
  auto dims = reduction_dims(all, x.rank());
  Value in = x.dtype() == DType::Pred ? b.convert(x, DType::U8) : x;
  return Values{is_max ? reduce_max(b, in, dims) : reduce_min(b, in, dims)};
});

TT_RULE({"aten::max.dim", "aten::min.dim"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  bool is_max = c.op == "aten::max.dim";
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (x.rank() == 0) return Values{x, b.constant_int(0, DType::S64)};
  if (x.shape()[dim] == 0)
    index_error(std::string(is_max ? "max" : "min") + "(): Expected reduction dim " + std::to_string(dim) +
                " to have non-zero size.");
  Values r = arg_reduce(b, x, dim, is_max);
  return Values{b.reshape(r[0], c.out(0).shape), b.reshape(r[1], c.out(1).shape)};
});

TT_RULE({"aten::argmax", "aten::argmin"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  bool is_max = c.op == "aten::argmax";
  const char* name = is_max ? "argmax" : "argmin";
  int64_t dim = 0;
  if (a[1].is_none()) {
    if (numel(x.shape()) == 0)
      index_error(std::string(name) + "(): Expected reduction dim to be specified for input.numel() == 0.");
    x = b.reshape(x, {numel(x.shape())});
  } else {
    dim = wrap_dim(a[1].i, x.rank());
    if (x.rank() == 0) return Values{b.constant_int(0, DType::S64, c.out().shape)};
    if (x.shape()[dim] == 0)
      index_error(std::string(name) + "(): Expected reduction dim " + std::to_string(dim) +
                  " to have non-zero size.");
  }
  return Values{b.reshape(arg_reduce(b, x, dim, is_max)[1], c.out().shape)};
});

TT_RULE({"aten::amax", "aten::amin"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  auto dims = reduction_dims(a[1], x.rank());
  for (auto d : dims)
    if (x.shape()[d] == 0)
      index_error(std::string(c.op == "aten::amax" ? "amax" : "amin") +
                  "(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.");
  Value in = x.dtype() == DType::Pred ? b.convert(x, DType::U8) : x;
  Value r = c.op == "aten::amax" ? reduce_max(b, in, dims) : reduce_min(b, in, dims);
  return Values{b.reshape(r, c.out().shape)};
});
TT_PADDING({"aten::amax"}, Padding::fill({{"self", -INFINITY}}));

TT_RULE({"aten::aminmax"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  auto dims = reduction_dims(a[1], x.rank());
  if (a[1].is_none() && numel(x.shape()) == 0)
    torch_error("aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  for (auto d : dims)
    if (x.shape()[d] == 0)
      index_error("aminmax: Expected reduction dim " + std::to_string(d) + " to have non-zero size.");
  Value in = x.dtype() == DType::Pred ? b.convert(x, DType::U8) : x;
  return Values{b.reshape(reduce_min(b, in, dims), c.out(0).shape),
                b.reshape(reduce_max(b, in, dims), c.out(1).shape)};
});

// ---- var / std -------------------------------------------------------------------------

// (variance, mean) of `x` over `dims` in dtype `acc`; `correction` is a
// runtime Scalar or None (1).
std::pair<Value, Value> var_mean(Builder& b, Value x, const std::vector<int64_t>& dims, const Arg& correction,
                                 DType acc) {
  x = b.convert(x, acc);
  double n = static_cast<double>(count_of(x, dims));
  Value sum = reduce_sum(b, x, dims);
  Value mean = b.div(sum, full_like(b, sum, n));
  Value d = b.sub(x, expand_reduced(b, mean, x.shape(), dims));
  Value ss = reduce_sum(b, b.mul(d, d), dims);
  Value corr = correction.is_none() ? b.constant(1, acc) : b.convert(correction.value(), acc);
  Value denom = b.max(b.sub(b.constant(n, acc), corr), b.constant(0, acc));
  Value var = b.div(ss, b.broadcast_to(denom, ss.shape()));
  return {var, mean};
}

Values var_std(Builder& b, const Args& a, const Context& c, bool sqrt, bool with_mean) {
  Value x = a[0].value();
  auto dims = dims_for(a[1], x, c.out());
  DType acc = compute_dtype(c.out().dtype);
  if (!hlo::is_float(acc)) throw LoweringError("var/std of a non-float result type");
  Value var, mean;
  if (hlo::is_complex(x.dtype())) {
    // E|z - mean|^2 = var(real) + var(imag); the mean stays complex.
    auto [vr, mr] = var_mean(b, b.real(x), dims, a[2], acc);
    auto [vi, mi] = var_mean(b, b.imag(x), dims, a[2], acc);
    var = b.add(vr, vi);
    mean = b.complex(mr, mi);
  } else {
    std::tie(var, mean) = var_mean(b, x, dims, a[2], acc);
  }
  if (sqrt) var = b.sqrt(var);
  Values r{b.reshape(var, c.out(0).shape)};
  if (with_mean) r.push_back(b.reshape(mean, c.out(1).shape));
  return r;
}

TT_RULE({"aten::var.correction"}, [](Builder& b, const Args& a, const Context& c) { return var_std(b, a, c, false, false); });
TT_RULE({"aten::std.correction"}, [](Builder& b, const Args& a, const Context& c) { return var_std(b, a, c, true, false); });
TT_RULE({"aten::var_mean.correction"}, [](Builder& b, const Args& a, const Context& c) { return var_std(b, a, c, false, true); });
TT_RULE({"aten::std_mean.correction"}, [](Builder& b, const Args& a, const Context& c) { return var_std(b, a, c, true, true); });

// ---- norms -------------------------------------------------------------------------------

// linalg_vector_norm(self, Scalar ord, int[1]? dim, bool keepdim, ScalarType? dtype).
// `ord` picks the algorithm, so Scalars are static for this rule.
TT_RULE({"aten::linalg_vector_norm"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  double ord = a[1].d;
  auto dims = dims_for(a[2], x, c.out());
  DType acc = compute_dtype(c.out().dtype);
  if (!hlo::is_float(acc)) throw LoweringError("linalg_vector_norm of a non-float result type");
  if (hlo::is_complex(x.dtype())) x = b.abs(x);  // the norm of the magnitudes
  x = b.convert(x, acc);
  Value ax = b.abs(x);
  Value r;
  if (std::isinf(ord)) {
    for (auto d : dims)
      if (x.shape()[d] == 0)
        torch_error("linalg.vector_norm cannot compute the " + std::string(ord > 0 ? "inf" : "-inf") +
                    " norm on an empty tensor because the operation does not have an identity");
    r = ord > 0 ? reduce_max(b, ax, dims) : reduce_min(b, ax, dims);
  } else if (ord == 0) {
    r = reduce_sum(b, b.convert(b.compare(x, full_like(b, x, 0), Cmp::NE), acc), dims);
  } else if (ord == 1) {
    r = reduce_sum(b, ax, dims);
  } else if (ord == 2) {
    r = b.sqrt(reduce_sum(b, b.mul(x, x), dims));
  } else {
    Value p = b.binary("stablehlo.power", ax, full_like(b, ax, ord));
    Value s = reduce_sum(b, p, dims);
    r = b.binary("stablehlo.power", s, full_like(b, s, 1.0 / ord));
  }
  return Values{b.reshape(r, c.out().shape)};
}, false, /*static_scalars=*/true);

// The legacy norm overloads: norm(self, p?, dim, keepdim[, dtype]) and
// norm(self, p[, dtype]) -> linalg_vector_norm(self, p, dim, keepdim, dtype).
// p picks the algorithm, so Scalars are static here too.
Values legacy_norm(Builder& b, const Args& a, const Context& c) {
  const Rule* vn = find_rule("aten::linalg_vector_norm");
  if (!vn) throw LoweringError("norm: linalg_vector_norm has no rule");
  Args v(5);
  v[0] = a[0];
  v[1] = a.size() > 1 ? a[1] : Arg{};
  if (v[1].is_none()) {
    v[1].kind = Arg::Kind::Scalar;
    v[1].d = 2.0;
    v[1].i = 2;
  }
  bool has_dim = a.size() > 2 && a[2].kind == Arg::Kind::IntList;
  if (has_dim) {
    v[2] = a[2];
    v[3] = a[3];
  } else {
    v[3].kind = Arg::Kind::Bool;
    v[3].b = false;
  }
  return vn->fn(b, v, c);
}
TT_RULE({"aten::norm.Scalar", "aten::norm.ScalarOpt_dim", "aten::norm.ScalarOpt_dim_dtype",
         "aten::norm.ScalarOpt_dtype"}, legacy_norm, false, /*static_scalars=*/true);

// ---- any / all / count_nonzero ---------------------------------------------------------------

Value nonzero(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  return b.compare(x, full_like(b, x, 0), Cmp::NE);
}

TT_RULE({"aten::any", "aten::any.dim", "aten::any.dims", "aten::all", "aten::all.dim", "aten::all.dims"},
        [](Builder& b, const Args& a, const Context& c) {
          Value x = a[0].value();
          Arg all;
          auto dims = a.size() > 1 ? dims_for(a[1], x, c.out()) : reduction_dims(all, x.rank());
          bool is_any = c.op.rfind("aten::any", 0) == 0;
          Value p = nonzero(b, x);
          Value r = is_any ? b.reduce(p, b.constant_int(0, DType::Pred), dims, "stablehlo.or")
                           : b.reduce(p, b.constant_int(1, DType::Pred), dims, "stablehlo.and");
          return Values{b.reshape(r, c.out().shape)};
        });

TT_RULE({"aten::count_nonzero.dim_IntList", "aten::count_nonzero"},
        [](Builder& b, const Args& a, const Context& c) {
          Value x = a[0].value();
          auto dims = reduction_dims(a[1], x.rank());
          Value r = reduce_sum(b, b.convert(nonzero(b, x), DType::S64), dims);
          return Values{b.reshape(r, c.out().shape)};
        });

// ---- trace ------------------------------------------------------------------------------------

// trace: the sum of the main diagonal (integers accumulate in int64).
TT_RULE({"aten::trace"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  if (x.rank() != 2)
    throw std::runtime_error("trace: expected a matrix, but got tensor with dim " + std::to_string(x.rank()));
  DType acc = compute_dtype(c.out().dtype);
  x = b.convert(x, acc);
  Value diag = b.compare(b.iota(Type{DType::S64, x.shape()}, 0), b.iota(Type{DType::S64, x.shape()}, 1), Cmp::EQ);
  Value s = reduce_sum(b, b.select(diag, x, b.constant(0, acc, x.shape())), {0, 1});
  return Values{b.convert(s, c.out().dtype)};
});

// ---- logsumexp --------------------------------------------------------------------------------

TT_RULE({"aten::logsumexp"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  auto dims = dims_for(a[1], x, c.out());
  DType acc = compute_dtype(c.out().dtype);
  if (!hlo::is_float(acc)) throw LoweringError("logsumexp of a non-float result type");
  x = b.convert(x, acc);
  Value m = reduce_max(b, x, dims);
  Value inf = full_like(b, m, std::numeric_limits<double>::infinity());
  m = b.select(b.compare(b.abs(m), inf, Cmp::EQ), full_like(b, m, 0), m);
  Value s = reduce_sum(b, b.exp(b.sub(x, expand_reduced(b, m, x.shape(), dims))), dims);
  return Values{b.reshape(b.add(b.log(s), m), c.out().shape)};
});
TT_PADDING({"aten::logsumexp"}, Padding::fill({{"self", -INFINITY}}));

// ---- cumulative ---------------------------------------------------------------------------------

// Inclusive scan along `dim` as a reduce_window whose window covers the whole
// prefix (XLA rewrites such windows into an efficient scan).
Value scan(Builder& b, Value x, int64_t dim, bool prod) {
  int64_t n = x.shape()[dim];
  int64_t r = x.rank();
  std::vector<int64_t> window(r, 1), strides(r, 1), dil(r, 1);
  std::vector<std::pair<int64_t, int64_t>> pad(r, {0, 0});
  window[dim] = n;
  pad[dim] = {n - 1, 0};
  Value init = prod ? b.constant(1, x.dtype()) : b.constant(0, x.dtype());
  std::string op = prod ? "stablehlo.multiply" : "stablehlo.add";
  return b.reduce_window({x}, {init}, window, strides, dil, dil, pad, [op](Builder& b, const Values& v) {
    return Values{b.binary(op, v[0], v[1])};
  })[0];
}

TT_RULE({"aten::cumsum", "aten::cumprod"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  DType acc = compute_dtype(c.out().dtype);
  if (acc == DType::Pred) acc = DType::S64;
  x = b.convert(x, acc);
  if (x.rank() == 0 || numel(x.shape()) == 0) return Values{x};
  return Values{scan(b, x, dim, c.op == "aten::cumprod")};
});

}  // namespace
}  // namespace tt::lowering
