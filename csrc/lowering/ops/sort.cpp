// Sorting: sort (default and .stable; ascending puts NaN last, descending
// first, as PyTorch does), topk (largest/smallest; via a stable sort).
// argsort and msort decompose into sort.
#include <algorithm>
#include <stdexcept>

#include "lowering/helpers.h"

namespace tt::lowering {
namespace {

using hlo::Cmp;

// wrap_dim, raising PyTorch's IndexError (as std::out_of_range) for a bad dim:
// these ops' meta kernels do not check it.
int64_t checked_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    throw std::out_of_range("Dimension out of range (expected to be in range of [" + std::to_string(-r) + ", " +
                            std::to_string(r - 1) + "], but got " + std::to_string(dim) + ")");
  return wrap_dim(dim, rank);
}

// Stable sort of `x` along `dim`; returns (values, int64 indices). NaN counts
// as larger than every number.
Values sort_with_indices(Builder& b, Value x, int64_t dim, bool descending) {
  bool pred = x.dtype() == DType::Pred;
  if (pred) x = b.convert(x, DType::U8);
  bool fl = hlo::is_float(x.dtype());
  Value idx = b.iota(Type{DType::S64, x.shape()}, dim);
  Values r = b.sort({x, idx}, dim, /*stable=*/true, [descending, fl](Builder& b, const Values& v) {
    Value l = v[0], r = v[1];
    Value less = b.compare(l, r, descending ? Cmp::GT : Cmp::LT);
    if (fl) {
      Value lnan = b.compare(l, l, Cmp::NE), rnan = b.compare(r, r, Cmp::NE);
      // ascending: a number before NaN; descending: NaN before a number.
      Value nan_first = descending ? b.and_(lnan, b.not_(rnan)) : b.and_(rnan, b.not_(lnan));
      less = b.or_(less, nan_first);
    }
    return Values{less};
  });
  if (pred) r[0] = b.convert(r[0], DType::Pred);
  return r;
}

Values sort_values(Builder& b, Value x, int64_t dim_arg, bool desc) {
  int64_t dim = checked_dim(dim_arg, x.rank());
  if (x.rank() == 0) return Values{x, b.constant_int(0, DType::S64)};
  return sort_with_indices(b, x, dim, desc);
}

// sort.stable(self, *, stable?, dim, descending); eager sort.default reaches
// it through its CompositeExplicitAutograd kernel (whose meta checks the dim).
TT_RULE({"aten::sort.stable"}, [](Builder& b, const Args& a, const Context&) {
  return sort_values(b, a[0].value(), a[2].i, a[3].b);
});

// sort(self, dim, descending), as graphs keep it (always stable here).
TT_GRAPH_RULE({"aten::sort"}, [](Builder& b, const Args& a, const Context&) {
  return sort_values(b, a[0].value(), a[1].i, a[2].b);
});

// topk(self, k, dim, largest, sorted): the first k of a stable sort (the
// result is always sorted, which sorted=False allows).
TT_RULE({"aten::topk"}, [](Builder& b, const Args& a, const Context& c) {
  Value x = a[0].value();
  int64_t k = a[1].i;
  int64_t dim = checked_dim(a[2].i, x.rank());
  bool largest = a[3].b;
  if (x.rank() == 0) return Values{x, b.constant_int(0, DType::S64)};
  Values s = sort_with_indices(b, x, dim, largest);
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape();
  limit[dim] = k;
  return Values{b.slice(s[0], start, limit), b.slice(s[1], start, limit)};
});

}  // namespace
}  // namespace tt::lowering
