// Complex numbers: torch.complex, torch.polar, conj_physical. The other
// complex support lives in the shared rules (arithmetic, abs, angle, sgn,
// exp/log/trig, reductions, matmuls take complex<f32>/complex<f64> as they
// are); real/imag/view_as_real/view_as_complex are views of the storage
// (lowering/view.cpp reads complex storages as interleaved parts).
#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

// The real and imaginary parts, converted to the parts' type of the result
// and broadcast to its shape.
Values parts_for(Builder& b, Value re, Value im, const Type& out) {
  DType t = hlo::real_dtype(out.dtype);
  return {cast_to(b, re, t, out.shape), cast_to(b, im, t, out.shape)};
}

TT_RULE({"aten::complex"}, [](Builder& b, const Args& a, const Context& c) {
  Values p = parts_for(b, a[0].value(), a[1].value(), c.out());
  return Values{b.complex(p[0], p[1])};
});

// polar(abs, angle) = abs * (cos(angle) + i sin(angle)).
TT_RULE({"aten::polar"}, [](Builder& b, const Args& a, const Context& c) {
  Values p = parts_for(b, a[0].value(), a[1].value(), c.out());
  Value re = b.mul(p[0], b.unary("stablehlo.cosine", p[1]));
  Value im = b.mul(p[0], b.unary("stablehlo.sine", p[1]));
  return Values{b.complex(re, im)};
});

// The conjugate, materialized (Tensor.conj() is a lazy view instead; the
// executor applies a view's conjugate bit where it reads it).
TT_RULE({"aten::conj_physical", "aten::_conj_physical"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = cast_to(b, a[0].value(), c.out().dtype, c.out().shape);
  if (!hlo::is_complex(x.dtype())) return Values{x};
  return Values{b.complex(b.real(x), b.neg(b.imag(x)))};
});

// ---- inside whole graphs, where views are values ---------------------------------

// view_as_real: [..., 2] of (real, imag).
TT_GRAPH_RULE({"aten::view_as_real", "aten::view_as_real_copy"}, [](Builder& b, const Args& a, const Context&) {
  Value z = a[0].value();
  Shape s = z.shape();
  s.push_back(1);
  return Values{b.concatenate({b.reshape(b.real(z), s), b.reshape(b.imag(z), s)}, z.rank())};
});

// view_as_complex: the last dim of 2 as (real, imag).
TT_GRAPH_RULE({"aten::view_as_complex", "aten::view_as_complex_copy"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  Shape s = x.shape();
  const int64_t last = x.rank() - 1;
  if (last < 0 || s[last] != 2) throw LoweringError("view_as_complex: the last dimension must have size 2");
  std::vector<int64_t> start(x.rank(), 0), limit = s;
  limit[last] = 1;
  Value re = b.slice(x, start, limit);
  start[last] = 1;
  limit[last] = 2;
  Value im = b.slice(x, start, limit);
  s.pop_back();
  return Values{b.complex(b.reshape(re, s), b.reshape(im, s))};
});

// The lazy conjugate and negation are plain values in a graph.
TT_GRAPH_RULE({"aten::_conj", "aten::_conj_copy"}, [](Builder& b, const Args& a, const Context&) {
  Value x = a[0].value();
  if (!hlo::is_complex(x.dtype())) return Values{x};
  return Values{b.complex(b.real(x), b.neg(b.imag(x)))};
});
TT_GRAPH_RULE({"aten::_neg_view", "aten::_neg_view_copy"}, [](Builder& b, const Args& a, const Context&) {
  return Values{b.neg(a[0].value())};
});

}  // namespace
}  // namespace tt::lowering
