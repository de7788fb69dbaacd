// Activation functions and the backward ops autograd calls for them: relu,
// threshold, gelu (erf and tanh), silu, mish, hardtanh, leaky_relu, elu, celu,
// softplus, hardswish, hardsigmoid; threshold_backward, sigmoid_backward,
// tanh_backward, gelu_backward, hardtanh_backward, leaky_relu_backward,
// elu_backward, softplus_backward, hardswish_backward, hardsigmoid_backward;
// hardshrink, softshrink and their backward ops, log_sigmoid_forward /
// log_sigmoid_backward, _prelu_kernel(_backward), glu / glu_backward,
// rrelu_with_noise_functional in evaluation mode and rrelu_with_noise_backward.
// Formulas follow PyTorch's CPU kernels; f16/bf16 compute in f32.
#include <cmath>
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;
using hlo::is_float;

constexpr double kSqrt1_2 = 0.70710678118654752440;   // M_SQRT1_2
constexpr double k2_SqrtPi = 1.12837916709551257390;  // M_2_SQRTPI
constexpr double kSqrt2 = 1.41421356237309504880;     // M_SQRT2

Value cst(Builder& b, Value like, double v) { return full_like(b, like, v); }
Value zeros(Builder& b, Value like) { return full_like(b, like, 0); }
Value is_nan(Builder& b, Value x) { return b.compare(x, x, Cmp::NE); }

// Arguments of an activation, converted to the compute type and the result
// shape: tensors and Scalars alike (a None stays an invalid Value).
struct Inputs {
  DType ct;
  Values v;
  const Value& operator[](size_t i) const { return v[i]; }
};

Inputs inputs(Builder& b, const Args& a, const Context& c, bool integers_ok = false) {
  const Type& out = c.out();
  if (out.dtype == DType::Pred || (!integers_ok && !is_float(out.dtype)))
    throw LoweringError(c.op + ": unsupported type " + hlo::mlir_name(out.dtype));
  Inputs in{compute_dtype(out.dtype), {}};
  for (const Arg& x : a) {
    if (x.is_tensor() || x.kind == Arg::Kind::Scalar) in.v.push_back(cast_to(b, x.value(), in.ct, out.shape));
    else in.v.push_back(Value{});
  }
  return in;
}

Values done(Builder& b, Value r, const Context& c) { return {b.convert(r, c.out().dtype)}; }

Value exp(Builder& b, Value x) { return b.exp(x); }
Value expm1(Builder& b, Value x) { return b.unary("stablehlo.exponential_minus_one", x); }
Value log1p(Builder& b, Value x) { return b.unary("stablehlo.log_plus_one", x); }
Value erf(Builder& b, Value x) { return b.unary("chlo.erf", x); }
Value sigmoid(Builder& b, Value x) { return b.unary("stablehlo.logistic", x); }

// max(x, 0) keeping NaN.
Value relu(Builder& b, Value x) { return b.select(b.compare(x, zeros(b, x), Cmp::LT), zeros(b, x), x); }

TT_RULE({"aten::relu"}, [](Builder& b, const Args& a, const Context& c) {
  // PyTorch's own error (the CPU kernel's check), not a decline to decompose.
  if (c.out().dtype == DType::Pred) throw InvalidArgument("Boolean inputs not supported for relu");
  auto in = inputs(b, a, c, true);
  return done(b, relu(b, in[0]), c);
});

// threshold(x, th, value) = x <= th ? value : x.
TT_RULE({"aten::threshold"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c, true);
  return done(b, b.select(b.compare(in[0], in[1], Cmp::LE), in[2], in[0]), c);
});

// threshold_backward(grad, self, th) = self <= th ? 0 : grad.
TT_RULE({"aten::threshold_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c, true);
  return done(b, b.select(b.compare(in[1], in[2], Cmp::LE), zeros(b, in[0]), in[0]), c);
});

std::string approximate(const Args& a, size_t i) {
  std::string s = a.size() > i && a[i].kind == Arg::Kind::String ? a[i].s : "none";
  if (s != "none" && s != "tanh") throw LoweringError("gelu: unknown approximate '" + s + "'");
  return s;
}

TT_RULE({"aten::gelu"}, [](Builder& b, const Args& a, const Context& c) {
  std::string mode = approximate(a, 1);
  auto in = inputs(b, a, c);
  Value x = in[0];
  Value half_x = b.mul(x, cst(b, x, 0.5));
  if (mode == "tanh") {
    // 0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3)))
    Value x3 = b.mul(b.mul(x, x), x);
    Value inner = b.mul(cst(b, x, kSqrt2 * k2_SqrtPi * 0.5), b.add(x, b.mul(cst(b, x, 0.044715), x3)));
    return done(b, b.mul(half_x, b.add(cst(b, x, 1), b.tanh(inner))), c);
  }
  // x * 0.5 * (1 + erf(x / sqrt 2))
  return done(b, b.mul(half_x, b.add(cst(b, x, 1), erf(b, b.mul(x, cst(b, x, kSqrt1_2))))), c);
});

TT_RULE({"aten::gelu_backward"}, [](Builder& b, const Args& a, const Context& c) {
  std::string mode = approximate(a, 2);
  auto in = inputs(b, a, c);
  Value g = in[0], x = in[1];
  Value one = cst(b, x, 1), half = cst(b, x, 0.5);
  if (mode == "tanh") {
    const double kBeta = kSqrt2 * k2_SqrtPi * 0.5, kKappa = 0.044715;
    Value x2 = b.mul(x, x);
    Value x3 = b.mul(x2, x);
    Value inner = b.mul(cst(b, x, kBeta), b.add(x, b.mul(cst(b, x, kKappa), x3)));
    Value t = b.tanh(inner);
    Value left = b.mul(half, x);
    Value right = b.add(one, t);
    Value left_d = b.mul(half, right);
    Value tanh_d = b.sub(one, b.mul(t, t));
    Value inner_d = b.mul(cst(b, x, kBeta), b.add(one, b.mul(cst(b, x, 3 * kKappa), x2)));
    Value right_d = b.mul(b.mul(left, tanh_d), inner_d);
    return done(b, b.mul(g, b.add(left_d, right_d)), c);
  }
  const double kAlpha = k2_SqrtPi * kSqrt1_2 * 0.5;
  Value cdf = b.mul(half, b.add(one, erf(b, b.mul(x, cst(b, x, kSqrt1_2)))));
  Value pdf = b.mul(cst(b, x, kAlpha), exp(b, b.mul(b.mul(x, x), cst(b, x, -0.5))));
  return done(b, b.mul(g, b.add(cdf, b.mul(x, pdf))), c);
});

// silu(x) = x / (1 + exp(-x)).
TT_RULE({"aten::silu"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value x = in[0];
  return done(b, b.div(x, b.add(cst(b, x, 1), exp(b, b.neg(x)))), c);
});

// mish(x) = x * tanh(softplus(x)).
TT_RULE({"aten::mish"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value x = in[0];
  return done(b, b.mul(x, b.tanh(log1p(b, exp(b, x)))), c);
});

TT_RULE({"aten::sigmoid_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], y = in[1];
  return done(b, b.mul(b.mul(g, b.sub(cst(b, y, 1), y)), y), c);
});

TT_RULE({"aten::tanh_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], y = in[1];
  return done(b, b.mul(g, b.sub(cst(b, y, 1), b.mul(y, y))), c);
});

// hardtanh(x, lo, hi) = min(max(x, lo), hi), NaN kept.
TT_RULE({"aten::hardtanh"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c, true);
  Value x = in[0];
  Value r = b.select(b.compare(x, in[1], Cmp::LT), in[1], x);
  r = b.select(b.compare(r, in[2], Cmp::GT), in[2], r);
  return done(b, r, c);
});

TT_RULE({"aten::hardtanh_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], x = in[1];
  Value out_of_range = b.or_(b.compare(x, in[2], Cmp::LE), b.compare(x, in[3], Cmp::GE));
  return done(b, b.select(out_of_range, zeros(b, g), g), c);
});

// leaky_relu(x, s) = x > 0 ? x : x * s.
TT_RULE({"aten::leaky_relu"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value x = in[0];
  return done(b, b.select(b.compare(x, zeros(b, x), Cmp::GT), x, b.mul(x, in[1])), c);
});

TT_RULE({"aten::leaky_relu_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], x = in[1];
  return done(b, b.select(b.compare(x, zeros(b, x), Cmp::GT), g, b.mul(g, in[2])), c);
});

// elu(x, alpha, scale, input_scale) = x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale.
Value elu_value(Builder& b, Value x, Value alpha, Value scale, Value input_scale) {
  Value neg = b.mul(expm1(b, b.mul(x, input_scale)), b.mul(alpha, scale));
  return b.select(b.compare(x, zeros(b, x), Cmp::LE), neg, b.mul(x, scale));
}

TT_RULE({"aten::elu"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  return done(b, elu_value(b, in[0], in[1], in[2], in[3]), c);
});

// celu(x, alpha) = elu(x, alpha, 1, 1 / alpha).
TT_RULE({"aten::celu"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value x = in[0];
  Value alpha = in.v.size() > 1 && in[1].valid() ? in[1] : cst(b, x, 1.0);
  Value one = cst(b, x, 1.0);
  return done(b, elu_value(b, x, alpha, one, b.div(one, alpha)), c);
});

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result).
TT_RULE({"aten::elu_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], alpha = in[1], scale = in[2], input_scale = in[3], x = in[5];
  bool is_result = a[4].b;
  Value negcoef = b.mul(alpha, scale);
  Value neg = is_result ? b.mul(b.mul(g, input_scale), b.add(x, negcoef))
                        : b.mul(b.mul(b.mul(g, input_scale), negcoef), exp(b, b.mul(x, input_scale)));
  return done(b, b.select(b.compare(x, zeros(b, x), Cmp::LE), neg, b.mul(g, scale)), c);
});

// softplus(x, beta, th) = x * beta > th ? x : log1p(exp(x * beta)) / beta.
TT_RULE({"aten::softplus"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value x = in[0], beta = in[1], th = in[2];
  Value xb = b.mul(x, beta);
  return done(b, b.select(b.compare(xb, th, Cmp::GT), x, b.div(log1p(b, exp(b, xb)), beta)), c);
});

TT_RULE({"aten::softplus_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], x = in[1], beta = in[2], th = in[3];
  Value xb = b.mul(x, beta);
  Value z = exp(b, xb);
  Value d = b.div(b.mul(g, z), b.add(z, cst(b, z, 1)));
  return done(b, b.select(b.compare(xb, th, Cmp::GT), g, d), c);
});

// relu6 of (x + 3), as PyTorch writes hardsigmoid/hardswish.
Value relu6_shift(Builder& b, Value x) {
  Value y = b.add(x, cst(b, x, 3));
  return b.min(b.max(y, zeros(b, y)), cst(b, y, 6));
}

TT_RULE({"aten::hardsigmoid"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  return done(b, b.div(relu6_shift(b, in[0]), cst(b, in[0], 6)), c);
});

TT_RULE({"aten::hardswish"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value x = in[0];
  return done(b, b.div(b.mul(x, relu6_shift(b, x)), cst(b, x, 6)), c);
});

TT_RULE({"aten::hardsigmoid_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], x = in[1];
  Value inside = b.and_(b.compare(x, cst(b, x, -3), Cmp::GT), b.compare(x, cst(b, x, 3), Cmp::LT));
  return done(b, b.select(inside, b.mul(g, cst(b, g, 1.0 / 6.0)), zeros(b, g)), c);
});

TT_RULE({"aten::hardswish_backward"}, [](Builder& b, const Args& a, const Context& c) {
  auto in = inputs(b, a, c);
  Value g = in[0], x = in[1];
  // x <= -3: 0; -3 < x < 3: g * (x / 3 + 0.5); x >= 3: g (PyTorch's CPU kernel).
  Value mid = b.mul(g, b.add(b.div(x, cst(b, x, 3)), cst(b, x, 0.5)));
  Value r = b.select(b.compare(x, cst(b, x, 3), Cmp::LT), mid, g);
  return done(b, b.select(b.compare(x, cst(b, x, -3), Cmp::LE), zeros(b, g), r), c);
});

// In [-lambd, lambd]: 0 (NaN propagates through x * 0).
Value shrink_band(Builder& b, Value x, Value lambd) {
  return b.and_(b.compare(x, b.neg(lambd), Cmp::GE), b.compare(x, lambd, Cmp::LE));
}

TT_RULE({"aten::hardshrink"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = cast_to(b, a[0].value(), compute_dtype(out.dtype), out.shape);
  Value l = cast_to(b, a[1].value(), x.dtype(), out.shape);
  return Values{b.convert(b.select(shrink_band(b, x, l), b.mul(x, cst(b, x, 0)), x), out.dtype)};
});

TT_RULE({"aten::softshrink"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value x = cast_to(b, a[0].value(), compute_dtype(out.dtype), out.shape);
  Value l = cast_to(b, a[1].value(), x.dtype(), out.shape);
  Value r = b.select(b.compare(x, l, Cmp::GT), b.sub(x, l),
                     b.select(b.compare(x, b.neg(l), Cmp::LT), b.add(x, l), b.mul(x, cst(b, x, 0))));
  return Values{b.convert(r, out.dtype)};
});

// hardshrink_backward / softshrink_backward(grad, self, lambd): grad outside the band.
TT_RULE({"aten::hardshrink_backward", "aten::softshrink_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  Value g = cast_to(b, a[0].value(), compute_dtype(out.dtype), out.shape);
  Value x = cast_to(b, a[1].value(), g.dtype(), out.shape);
  Value l = cast_to(b, a[2].value(), g.dtype(), out.shape);
  return Values{b.convert(b.select(shrink_band(b, x, l), cst(b, g, 0), g), out.dtype)};
});

// d/dx log(sigmoid(x)) = sigmoid(-x); the CPU's `buffer` argument is not needed.
TT_RULE({"aten::log_sigmoid_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value g = cast_to(b, a[0].value(), ct, out.shape);
  Value x = cast_to(b, a[1].value(), ct, out.shape);
  return Values{b.convert(b.mul(g, b.unary("stablehlo.logistic", b.neg(x))), out.dtype)};
});

// log_sigmoid_forward(x) -> (output, buffer): min(x, 0) - log1p(exp(-|x|));
// the buffer (a CPU-kernel detail) is returned as zeros: the backward above
// does not read it.
TT_RULE({"aten::log_sigmoid_forward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out(0);
  DType ct = compute_dtype(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape);
  Value r = b.sub(b.min(x, cst(b, x, 0)), b.unary("stablehlo.log_plus_one", b.exp(b.neg(b.abs(x)))));
  r = b.select(is_nan(b, x), x, r);
  return Values{b.convert(r, out.dtype), b.constant(0, c.out(1).dtype, c.out(1).shape)};
});

// _prelu_kernel(self, weight): weight already broadcasts against self.
TT_RULE({"aten::_prelu_kernel"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  DType ct = compute_dtype(out.dtype);
  Value x = cast_to(b, a[0].value(), ct, out.shape);
  Value w = cast_to(b, a[1].value(), ct, out.shape);
  return Values{b.convert(b.select(b.compare(x, cst(b, x, 0), Cmp::GT), x, b.mul(w, x)), out.dtype)};
});

// Sums `x` (shape `full`) down to `target`, a shape that broadcasts to it.
Value sum_to(Builder& b, Value x, const Shape& target) {
  if (x.shape() == target) return x;
  int64_t lead = x.rank() - static_cast<int64_t>(target.size());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i < lead || (target[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  return b.reshape(reduce_sum(b, x, dims), target);
}

// _prelu_kernel_backward(grad, self, weight) -> (grad_self, grad_weight)
TT_RULE({"aten::_prelu_kernel_backward"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& gx_t = c.out(0);
  const Type& gw_t = c.out(1);
  Shape full = broadcast_shapes({a[1].value().shape(), a[2].value().shape()});
  DType ct = compute_dtype(gx_t.dtype);
  Value g = cast_to(b, a[0].value(), ct, full);
  Value x = cast_to(b, a[1].value(), ct, full);
  Value w = cast_to(b, a[2].value(), ct, full);
  Value pos = b.compare(x, cst(b, x, 0), Cmp::GT);
  Value gx = b.select(pos, g, b.mul(w, g));
  Value gw = b.select(pos, cst(b, g, 0), b.mul(x, g));
  return Values{b.convert(sum_to(b, gx, gx_t.shape), gx_t.dtype), b.convert(sum_to(b, gw, gw_t.shape), gw_t.dtype)};
});

// The two halves of `x` along `dim`.
std::pair<Value, Value> halves(Builder& b, Value x, int64_t dim) {
  std::vector<int64_t> start(x.rank(), 0), mid = x.shape(), limit = x.shape();
  int64_t h = x.shape()[dim] / 2;
  mid[dim] = h;
  Value lo = b.slice(x, start, mid);
  start[dim] = h;
  return {lo, b.slice(x, start, limit)};
}

// glu(x, dim) = a * sigmoid(b) for the halves a, b of x.
TT_RULE({"aten::glu"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t dim = wrap_dim(a[1].i, x.rank());
  if (x.shape()[dim] % 2) throw std::runtime_error("Halving dimension must be even, but dimension " +
                                                   std::to_string(dim) + " is size " + std::to_string(x.shape()[dim]));
  DType ct = compute_dtype(c.out().dtype);
  auto [p, q] = halves(b, b.convert(x, ct), dim);
  // The CPU kernel rounds sigmoid(b) to the tensor's dtype before the product.
  Value s = b.convert(b.convert(b.unary("stablehlo.logistic", q), c.out().dtype), ct);
  return Values{b.convert(b.mul(p, s), c.out().dtype)};
});

// glu_backward(grad, self, dim): d/da = g s(b); d/db = g a s(b) (1 - s(b)).
TT_RULE({"aten::glu_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[1].value();
  int64_t dim = wrap_dim(a[2].i, x.rank());
  DType ct = compute_dtype(c.out().dtype);
  Value g = b.convert(a[0].value(), ct);
  auto [p, q] = halves(b, b.convert(x, ct), dim);
  Value s = b.unary("stablehlo.logistic", q);
  Value gp = b.mul(g, s);
  Value gq = b.mul(b.mul(gp, p), b.sub(cst(b, s, 1), s));
  return Values{b.convert(b.concatenate({gp, gq}, dim), c.out().dtype)};
});

// rrelu_with_noise_functional(self, noise, lower, upper, training, generator)
//   -> (out, noise_out): in evaluation mode a leaky ReLU with slope
// (lower + upper) / 2, the noise unchanged. (The eager op rrelu_with_noise
// writes `noise` in place, which the backend's registration does not map to
// a rule; training mode's random slopes are declined.)
TT_RULE({"aten::rrelu_with_noise_functional"}, [](Builder& b, const Args& a, const Context& c) {
  if (a[4].b) throw LoweringError("rrelu_with_noise in training mode draws its noise in place");
  Value x = a[0].value();
  const Type& o = c.out();
  DType ct = compute_dtype(x.dtype());
  Value slope = b.div(b.add(b.convert(a[2].value(), DType::F64), b.convert(a[3].value(), DType::F64)),
                      b.constant(2, DType::F64));
  Value xc = b.convert(x, ct);
  Value neg = b.mul(xc, b.broadcast_in_dim(b.convert(slope, ct), xc.shape(), {}));
  Value r = b.select(b.compare(xc, full(b, 0, ct, xc.shape()), Cmp::GT), xc, neg);
  return Values{b.convert(r, o.dtype), a[1].value()};
});

// rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training,
//                           self_is_result)
TT_RULE({"aten::rrelu_with_noise_backward"}, [](Builder& b, const Args& a, const Context& c) {
  Value g = a[0].value(), x = a[1].value();
  DType ct = compute_dtype(g.dtype());
  Value gc = b.convert(g, ct), xc = b.convert(x, ct);
  double lower = host_scalar(a[3]), upper = host_scalar(a[4]);
  if (a[5].b && upper - lower > 1e-6)
    return Values{b.convert(b.mul(gc, b.convert(a[2].value(), ct)), c.out().dtype)};
  Value slope = b.constant((lower + upper) / 2, ct, gc.shape());
  Value r = b.select(b.compare(xc, full(b, 0, ct, xc.shape()), Cmp::GT), gc, b.mul(gc, slope));
  return Values{b.convert(r, c.out().dtype)};
}, false, true);

}  // namespace
}  // namespace tt::lowering
