// Products: mm, bmm, addmm, baddbmm, addbmm, dot, vdot, mv, addmv, addr
// (torch.matmul and F.linear decompose into these), and linalg_cross (the
// 3-vector cross product). f16/bf16 multiply in f32 and round once at the
// end, like PyTorch's CPU kernels; the float precision comes from
// matmul_precision() (operands rounded by mxu_operand under one bf16 pass).
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// The dtype a product in `out` dtype computes in.
DType product_dtype(DType out) {
  if (out == DType::Pred)
    throw std::runtime_error("\"addmm_impl_cpu_\" not implemented for 'Bool'");
  return lowering::compute_dtype(out);
}

Value product(Builder& b, Value lhs, Value rhs, const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
              const std::vector<int64_t>& lc, const std::vector<int64_t>& rc, DType acc) {
  if (lhs.dtype() != rhs.dtype())  // PyTorch's meta kernels do not check this; its CPU kernels do
    throw std::runtime_error(std::string("expected m1 and m2 to have the same dtype, but got: ") +
                             hlo::mlir_name(lhs.dtype()) + " != " + hlo::mlir_name(rhs.dtype()));
  lhs = mxu_operand(b, b.convert(lhs, acc));
  rhs = mxu_operand(b, b.convert(rhs, acc));
  std::string precision = hlo::is_float(acc) ? matmul_precision() : "DEFAULT";
  return b.dot_general(lhs, rhs, lb, rb, lc, rc, acc, precision);
}

// beta * self + alpha * prod, in `prod`'s dtype; self is ignored when beta is
// 0 (no nan/inf propagation), as PyTorch documents.
Value add_scaled(Builder& b, const Arg& self, Value prod, const Arg& beta, const Arg& alpha) {
  DType t = prod.dtype();
  const Shape& s = prod.shape();
  if (!alpha.is_none()) prod = b.mul(prod, cast_to(b, alpha.value(), t, s));
  Value in = cast_to(b, self.value(), t, s);
  if (beta.is_none()) return b.add(in, prod);
  Value bv = b.convert(beta.value(), t);
  Value scaled = b.mul(in, b.broadcast_to(bv, s));
  Value beta_zero = b.broadcast_to(b.compare(bv, b.constant(0, t), Cmp::EQ), s);
  return b.add(b.select(beta_zero, full_like(b, prod, 0), scaled), prod);
}

const Arg& opt(const Args& a, size_t i) {
  static const Arg none;
  return i < a.size() ? a[i] : none;
}

TT_RULE({"aten::mm"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  return Values{product(b, a[0].value(), a[1].value(), {}, {}, {1}, {0}, acc)};
});
TT_PADDING({"aten::mm"}, Padding::fill({{"self", 0}, {"mat2", 0}}));

TT_RULE({"aten::bmm"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  return Values{product(b, a[0].value(), a[1].value(), {0}, {0}, {2}, {1}, acc)};
});
TT_PADDING({"aten::bmm"}, Padding::fill({{"self", 0}, {"mat2", 0}}));

// out_dtype= products (mm.dtype, bmm.dtype, addmm.dtype, as CUDA has them;
// not baddbmm.dtype: PyTorch 2.13's meta function for it, its baddbmm
// decomposition, takes out_dtype for beta and raises): f16/bf16 inputs with a float32 result keep the float32
// accumulator unrounded; an out_dtype equal to the inputs' is the plain op.
// PyTorch's meta kernels check the dtypes and give the result type.
TT_RULE({"aten::mm.dtype"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{product(b, a[0].value(), a[1].value(), {}, {}, {1}, {0}, product_dtype(c.out().dtype))};
});
TT_RULE({"aten::bmm.dtype"}, [](Builder& b, const Args& a, const Context& c) {
  return Values{product(b, a[0].value(), a[1].value(), {0}, {0}, {2}, {1}, product_dtype(c.out().dtype))};
});
TT_RULE({"aten::addmm.dtype"}, [](Builder& b, const Args& a, const Context& c) {
  Value p = product(b, a[1].value(), a[2].value(), {}, {}, {1}, {0}, product_dtype(c.out().dtype));
  return Values{convert_dtype(b, add_scaled(b, a[0], p, opt(a, 4), opt(a, 5)), c.out().dtype)};
});

// vdot conjugates its first argument (a no-op for real types).
TT_RULE({"aten::dot", "aten::vdot"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  Value x = a[0].value();
  if (c.op == "aten::vdot" && hlo::is_complex(x.dtype())) x = b.complex(b.real(x), b.neg(b.imag(x)));
  return Values{product(b, x, a[1].value(), {}, {}, {0}, {0}, acc)};
});

TT_RULE({"aten::mv"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  return Values{product(b, a[0].value(), a[1].value(), {}, {}, {1}, {0}, acc)};
});

// addmm(self, mat1, mat2, *, beta, alpha) and friends.
TT_RULE({"aten::addmm"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  Value p = product(b, a[1].value(), a[2].value(), {}, {}, {1}, {0}, acc);
  return Values{add_scaled(b, a[0], p, opt(a, 3), opt(a, 4))};
});
TT_PADDING({"aten::addmm"}, Padding::fill({{"mat1", 0}, {"mat2", 0}}));

TT_RULE({"aten::baddbmm"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  Value p = product(b, a[1].value(), a[2].value(), {0}, {0}, {2}, {1}, acc);
  return Values{add_scaled(b, a[0], p, opt(a, 3), opt(a, 4))};
});

TT_RULE({"aten::addbmm"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  // Sum over the batch too: contract the batch and inner dims together.
  Value p = product(b, a[1].value(), a[2].value(), {}, {}, {0, 2}, {0, 1}, acc);
  return Values{add_scaled(b, a[0], p, opt(a, 3), opt(a, 4))};
});

TT_RULE({"aten::addmv"}, [](Builder& b, const Args& a, const Context& c) {
  DType acc = product_dtype(c.out().dtype);
  Value p = product(b, a[1].value(), a[2].value(), {}, {}, {1}, {0}, acc);
  return Values{add_scaled(b, a[0], p, opt(a, 3), opt(a, 4))};
});

TT_RULE({"aten::addr"}, [](Builder& b, const Args& a, const Context& c) {
  DType t = c.out().dtype;
  if (t == DType::Pred) throw LoweringError("addr on bool tensors");
  DType acc = compute_dtype(t);
  Value v1 = b.convert(a[1].value(), acc), v2 = b.convert(a[2].value(), acc);
  Shape s{v1.shape()[0], v2.shape()[0]};
  Value p = b.mul(b.broadcast_in_dim(v1, s, {0}), b.broadcast_in_dim(v2, s, {1}));
  return Values{add_scaled(b, a[0], p, opt(a, 3), opt(a, 4))};
});

// linalg_cross(self, other, dim): the 3-vector cross product along dim.
TT_RULE({"aten::linalg_cross"}, [](Builder& b, const Args& a, const Context& c) {
  const Type& out = c.out();
  int64_t d = wrap_dim(a[2].i, out.rank());
  Value x = cast_to(b, a[0].value(), out.dtype, out.shape), y = cast_to(b, a[1].value(), out.dtype, out.shape);
  auto comp = [&](Value v, int64_t i) {
    std::vector<int64_t> start(out.rank(), 0), limit = out.shape;
    start[d] = i;
    limit[d] = i + 1;
    return b.slice(v, start, limit);
  };
  Value x0 = comp(x, 0), x1 = comp(x, 1), x2 = comp(x, 2), y0 = comp(y, 0), y1 = comp(y, 1), y2 = comp(y, 2);
  return Values{b.concatenate({b.sub(b.mul(x1, y2), b.mul(x2, y1)), b.sub(b.mul(x2, y0), b.mul(x0, y2)),
                               b.sub(b.mul(x0, y1), b.mul(x1, y0))}, d)};
});

}  // namespace
}  // namespace tt::lowering
