"""Indexing against the CPU: index_select, gather, scatter (src / value /
reduce), scatter_add, scatter_reduce, index_add / index_copy / index_fill,
take / put, advanced indexing (index.Tensor: several
broadcast index tensors, None entries, split index dims), index_put (with and
without accumulate, setitem), embedding and its backward. Boolean-mask
indexing has a data-dependent shape and is not lowered."""
import pytest
import torch
import torch.nn.functional as F

from optest import ALL, FLOAT, FLOATS, INTS, NUMERIC, OpCase, parametrize, run_case, same_error


def idx(*vals):
    """An int64 index tensor moved to the device of the first operand."""
    t = torch.tensor(vals if len(vals) != 1 or not isinstance(vals[0], list) else vals[0])
    return lambda like: t.to(like.device)


def rand_index(hi, shape, seed=0, neg=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-hi if neg else 0, hi, shape, generator=g)


I3 = idx(2, 0, 2, 1)
I_NEG = idx(-1, 0, -3)
I_REV = idx(2, 0, 1, 0)
I_2D = idx([[0, 2], [1, 1], [3, 0]])
I_0D = lambda like: torch.tensor(1).to(like.device)  # noqa: E731
I_EMPTY = lambda like: torch.zeros(0, dtype=torch.long).to(like.device)  # noqa: E731
I_INT32 = lambda like: torch.tensor([1, 0], dtype=torch.int32).to(like.device)  # noqa: E731

G_IDX = rand_index(3, (3, 4), seed=1)  # gather/scatter index along dim 0 of a (3, 4) input
S_IDX = torch.tensor([[0, 1, 2, 0], [2, 0, 0, 1]])  # duplicates along dim 0


def dev(t, like):
    return t.to(like.device)


CASES = [
    # ---- index_select ----
    OpCase("index_select", lambda a: a.index_select(0, I3(a)), [[(3, 4)], [(3,)], [(3, 0)]], ALL, grad=True,
           out=lambda a, out: torch.index_select(a, 0, I3(a), out=out)),
    OpCase("index_select_dim1", lambda a: a.index_select(-1, I_REV(a)), [[(2, 3)], [(2, 3, 4)]], NUMERIC, grad=True),
    OpCase("index_select_0d_index", lambda a: a.index_select(1, I_0D(a)), [[(2, 3)]], FLOATS, grad=True),
    OpCase("index_select_empty_index", lambda a: a.index_select(1, I_EMPTY(a)), [[(2, 3)]], FLOAT),
    OpCase("index_select_0d_input", lambda a: a.index_select(0, torch.tensor([0]).to(a.device)), [[()]], FLOAT),
    OpCase("index_select_int32_index", lambda a: a.index_select(0, I_INT32(a)), [[(2, 3)]], FLOAT),
    # ---- gather ----
    OpCase("gather", lambda a: a.gather(0, dev(G_IDX, a)), [[(3, 4)]], ALL, grad=True,
           out=lambda a, out: torch.gather(a, 0, dev(G_IDX, a), out=out)),
    OpCase("gather_smaller_index", lambda a: a.gather(1, dev(G_IDX[:2, :2], a)), [[(3, 5)]], FLOATS + INTS,
           grad=True),
    OpCase("gather_neg_dim_3d", lambda a: a.gather(-1, dev(rand_index(4, (2, 3, 6), 2), a)), [[(2, 3, 4)]],
           FLOAT, grad=True),
    OpCase("gather_0d", lambda a: a.gather(0, torch.tensor(0).to(a.device)), [[()]], FLOAT, grad=True),
    OpCase("gather_empty", lambda a: a.gather(0, torch.zeros(0, 4, dtype=torch.long).to(a.device)), [[(3, 4)]],
           FLOAT),
    # ---- scatter ----
    OpCase("scatter_src", lambda a, s: a.scatter(1, dev(torch.tensor([[2, 0], [1, 3]]), a), s),
           [[(2, 4), (2, 3)]], ALL, inplace=lambda a, s: a.scatter_(1, dev(torch.tensor([[2, 0], [1, 3]]), a), s)),
    OpCase("scatter_value", lambda a: a.scatter(0, dev(torch.tensor([[1, 0, 2]]), a), -2.5), [[(3, 3)]], FLOATS,
           inplace=lambda a: a.scatter_(0, dev(torch.tensor([[1, 0, 2]]), a), -2.5)),
    OpCase("scatter_int_value", lambda a: a.scatter(1, dev(torch.tensor([[1], [0]]), a), 7), [[(2, 3)]], INTS),
    OpCase("scatter_reduce_add", lambda a, s: a.scatter(0, dev(S_IDX, a), s, reduce="add"),
           [[(3, 4), (2, 4)]], FLOATS + INTS),
    OpCase("scatter_reduce_multiply", lambda a, s: a.scatter(0, dev(S_IDX, a), s, reduce="multiply"),
           [[(3, 4), (2, 4)]], FLOAT + INTS),
    OpCase("scatter_value_reduce", lambda a: a.scatter(0, dev(S_IDX, a), 2.0, reduce="add"), [[(3, 4)]], FLOAT),
    OpCase("scatter_0d", lambda a, s: a.scatter(0, torch.tensor(0).to(a.device), s), [[(), ()]], FLOAT),
    OpCase("scatter_empty_index", lambda a, s: a.scatter(0, torch.zeros(0, 4, dtype=torch.long).to(a.device), s),
           [[(3, 4), (2, 4)]], FLOAT),
    OpCase("scatter_add", lambda a, s: a.scatter_add(0, dev(S_IDX, a), s), [[(3, 4), (2, 4)]],
           FLOATS + INTS, grad=True, inplace=lambda a, s: a.scatter_add_(0, dev(S_IDX, a), s)),
    OpCase("scatter_add_larger_src", lambda a, s: a.scatter_add(0, dev(S_IDX, a), s), [[(3, 4), (2, 5)]],
           FLOATS + INTS),
    OpCase("scatter_grad", lambda a, s: a.scatter(1, dev(torch.tensor([[2, 0], [1, 3]]), a), s),
           [[(2, 4), (2, 2)]], FLOATS, grad=True),
    OpCase("scatter_add_3d", lambda a, s: a.scatter_add(2, dev(rand_index(3, (2, 2, 5), 3), a), s),
           [[(2, 3, 3), (2, 2, 5)]], FLOAT, grad=True),
    # ---- index_add ----
    OpCase("index_add", lambda a, s: a.index_add(0, dev(torch.tensor([0, 2, 0]), a), s),
           [[(3, 4), (3, 4)]], FLOATS + INTS, grad=True,
           inplace=lambda a, s: a.index_add_(0, dev(torch.tensor([0, 2, 0]), a), s)),
    OpCase("index_add_alpha_dim1", lambda a, s: a.index_add(1, dev(torch.tensor([1, 2]), a), s, alpha=2),
           [[(2, 3), (2, 2)]], FLOAT, grad=True),
    OpCase("index_add_0d_alpha", lambda a, s: a.index_add(0, dev(torch.tensor([0]), a), s, alpha=-3),
           [[(), ()]], FLOAT + INTS, grad=True),
    # ---- index_reduce (duplicate indices; with and without self) ----
    *[OpCase(f"index_reduce_{r}_{'self' if inc else 'noself'}",
             lambda a, s, r=r, inc=inc: a.index_reduce(0, dev(torch.tensor([0, 2, 0, 2]), a), s, r, include_self=inc),
             [[(4, 3), (4, 3)]], FLOAT + INTS, grad=r != "mean" or inc,
             inplace=lambda a, s, r=r, inc=inc: a.index_reduce_(0, dev(torch.tensor([0, 2, 0, 2]), a), s, r,
                                                                include_self=inc))
      for r in ("prod", "mean", "amax", "amin") for inc in (True, False)],
    OpCase("index_reduce_dim1_empty", lambda a, s: a.index_reduce(1, dev(torch.tensor([], dtype=torch.long), a), s,
                                                                  "amax"), [[(2, 3), (2, 0)]], FLOAT),
    # ---- scatter_reduce ----
    *[OpCase(f"scatter_reduce_{r}_{'self' if inc else 'noself'}",
             (lambda r, inc: lambda a, s: a.scatter_reduce(0, dev(S_IDX, a), s, r, include_self=inc))(r, inc),
             [[(3, 4), (2, 4)]], FLOAT + INTS, grad=r in ("sum", "mean") and inc)
      for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)],
    OpCase("scatter_reduce_larger_src", lambda a, s: a.scatter_reduce(0, dev(S_IDX, a), s, "sum"),
           [[(3, 4), (2, 5)]], FLOAT),
    OpCase("scatter_reduce_half", lambda a, s: a.scatter_reduce(1, dev(torch.tensor([[0, 0, 2]]), a), s, "amax"),
           [[(2, 3), (1, 3)]], FLOATS[1:]),
    OpCase("scatter_reduce_int_mean_neg", lambda a, s: a.scatter_reduce(0, dev(S_IDX, a), s, "mean"),
           [[(3, 4), (2, 4)]], INTS, make=lambda s, d, i: torch.randint(-9, 9, s, generator=torch.Generator().manual_seed(i)).to(d)),
    # ---- index_copy / index_fill / take / put ----
    OpCase("index_copy", lambda a, s: a.index_copy(1, dev(torch.tensor([2, 0]), a), s), [[(3, 4), (3, 2)]],
           ALL, grad=True, inplace=lambda a, s: a.index_copy_(1, dev(torch.tensor([2, 0]), a), s)),
    OpCase("index_copy_0d", lambda a, s: a.index_copy(0, dev(torch.tensor([0]), a), s), [[(), ()]], FLOAT),
    OpCase("index_fill", lambda a: a.index_fill(0, dev(torch.tensor([2, 0, 2]), a), -1), [[(3, 4)], [(3,)]],
           FLOATS + INTS, grad=True, inplace=lambda a: a.index_fill_(0, dev(torch.tensor([2, 0, 2]), a), -1)),
    OpCase("index_fill_tensor_value", lambda a: a.index_fill(-1, dev(torch.tensor(1), a), dev(torch.tensor(5.5), a)),
           [[(2, 3)]], FLOATS, grad=True),
    OpCase("index_fill_bool", lambda a: a.index_fill(1, dev(torch.tensor([0]), a), True), [[(2, 3)]],
           (torch.bool,)),
    OpCase("take", lambda a: a.take(dev(torch.tensor([[0, 5], [-1, 3]]), a)), [[(3, 4)], [(2, 3, 2)]], ALL,
           grad=True, out=lambda a, out: torch.take(a, dev(torch.tensor([[0, 5], [-1, 3]]), a), out=out)),
    OpCase("put", lambda a, s: a.put(dev(torch.tensor([1, 7, -1]), a), s), [[(3, 4), (3,)]], FLOATS + INTS,
           grad=True, inplace=lambda a, s: a.put_(dev(torch.tensor([1, 7, -1]), a), s)),
    OpCase("put_accumulate", lambda a, s: a.put(dev(torch.tensor([[1, 1], [0, 1]]), a), s, accumulate=True),
           [[(2, 3), (2, 2)]], FLOAT + INTS, grad=True),
    # ---- advanced indexing ----
    OpCase("index_1", lambda a: a[I3(a)], [[(4, 3)], [(4,)]], ALL, grad=True),
    OpCase("index_neg", lambda a: a[I_NEG(a)], [[(3, 2)]], FLOATS + INTS, grad=True),
    OpCase("index_2d_index", lambda a: a[I_2D(a)], [[(4, 3)]], FLOAT, grad=True),
    OpCase("index_middle", lambda a: a[:, I3(a)], [[(2, 3, 4)]], FLOAT, grad=True),
    OpCase("index_two_broadcast", lambda a: a[idx([[0], [2]])(a), idx(1, 0, 3)(a)], [[(3, 4)], [(3, 4, 2)]],
           FLOATS + INTS, grad=True),
    OpCase("index_adjacent_middle", lambda a: a[:, idx(0, 2)(a), idx(1, 1)(a)], [[(2, 3, 4, 5)]], FLOAT,
           grad=True),
    OpCase("index_split", lambda a: a[idx(0, 1)(a), :, idx(2, 3)(a)], [[(2, 3, 4)]], FLOAT, grad=True),
    OpCase("index_split_broadcast", lambda a: a[idx([[0], [1]])(a), :, idx(2, 3, 0)(a)], [[(2, 3, 4)]], FLOAT,
           grad=True),
    OpCase("index_0d_index", lambda a: a[:, torch.tensor(2).to(a.device)], [[(3, 4)]], FLOAT, grad=True),
    OpCase("index_empty_index", lambda a: a[I_EMPTY(a)], [[(3, 4)]], FLOAT),
    OpCase("index_int32", lambda a: a[I_INT32(a)], [[(3, 4)]], FLOAT),
    OpCase("index_all_dims", lambda a: a[idx(0, 2)(a), idx(1, 0)(a)], [[(3, 2)]], FLOAT, grad=True),
    # ---- index_put ----
    OpCase("index_put", lambda a, v: a.index_put((idx(2, 0)(a),), v), [[(3, 4), (2, 4)], [(3, 4), (4,)],
                                                                       [(3, 4), ()]], ALL, grad=True,
           inplace=lambda a, v: a.index_put_((idx(2, 0)(a),), v)),
    OpCase("index_put_accumulate", lambda a, v: a.index_put((idx(0, 0, 2, -1)(a),), v, accumulate=True),
           [[(3, 4), (4, 4)], [(3,), (4,)]], FLOATS + INTS, grad=True,
           inplace=lambda a, v: a.index_put_((idx(0, 0, 2, -1)(a),), v, accumulate=True)),
    OpCase("index_put_two", lambda a, v: a.index_put((idx(0, 2)(a), idx(1, 1)(a)), v), [[(3, 2), (2,)]], FLOAT,
           grad=True),
    OpCase("index_put_none_entry", lambda a, v: torch.ops.aten.index_put(a, [None, idx(1, 0)(a)], v, True),
           [[(2, 3), (2, 2)]], FLOAT, grad=True),
    OpCase("index_put_split", lambda a, v: torch.ops.aten.index_put(a, [idx(0, 1)(a), None, idx(2, 0)(a)], v, True),
           [[(2, 3, 4), (2, 3)], [(2, 3, 4), (3,)]], FLOAT, grad=True),
    # ---- embedding ----
    OpCase("embedding", lambda w: F.embedding(dev(torch.tensor([[1, 3], [3, 0]]), w), w), [[(5, 3)]],
           FLOATS, grad=True),
    OpCase("embedding_padding_idx", lambda w: F.embedding(dev(torch.tensor([1, 2, 2, 0]), w), w, padding_idx=2),
           [[(4, 6)]], FLOATS, grad=True),
    OpCase("embedding_scale_grad_by_freq",
           lambda w: F.embedding(dev(torch.tensor([[1, 2], [2, 2]]), w), w, scale_grad_by_freq=True, padding_idx=0),
           [[(4, 3)]], FLOATS, grad=True),
    OpCase("embedding_0d", lambda w: F.embedding(dev(torch.tensor(2), w), w), [[(4, 3)]], FLOAT, grad=True),
]


@parametrize(CASES)
def test_indexing(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_setitem_forms():
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to("tpu")
    for key, val in [((torch.tensor([3, 1]),), 2.0), ((slice(None), torch.tensor([0, 5])), -1.0),
                     ((torch.tensor([0, 2]), torch.tensor([1, 4])), torch.tensor([7.0, 8.0]))]:
        dkey = tuple(k.to("tpu") if isinstance(k, torch.Tensor) else k for k in key)
        x[key] = val
        d[dkey] = val.to("tpu") if isinstance(val, torch.Tensor) else val
    torch.testing.assert_close(d.cpu(), x)


def test_index_put_duplicates_accumulate_grad():
    # index_put with accumulate adds every duplicate; its backward is a gather.
    w = torch.randn(5, 3, requires_grad=True)
    wd = w.detach().to("tpu").requires_grad_()
    i = torch.tensor([1, 1, 4, 1])
    for t, ii in ((w, i), (wd, i.to("tpu"))):
        z = torch.zeros(5, 3, device=t.device).index_put((ii,), t[ii] * 2, accumulate=True)
        (z * torch.arange(15.0, device=t.device).reshape(5, 3)).sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad)


MASK = lambda like: (torch.arange(12).reshape(3, 4) % 3 == 0).to(like.device)  # noqa: E731
MASK_ROWS = lambda like: torch.tensor([True, False, True]).to(like.device)  # noqa: E731

MASK_CASES = [
    # x[mask] = v with a single value is a select: no data-dependent shape.
    OpCase("setitem_mask", lambda a: a.index_put((MASK(a),), torch.tensor(-1).to(a.device, a.dtype)), [[(3, 4)]],
           FLOATS + INTS, grad=True,
           inplace=lambda a: a.index_put_((MASK(a),), torch.tensor(-1).to(a.device, a.dtype))),
    OpCase("setitem_mask_rows", lambda a: a.index_put((MASK_ROWS(a),), torch.tensor(2.0).to(a.device, a.dtype), True),
           [[(3, 4)], [(3,)]], FLOATS, grad=True),
    OpCase("setitem_bool_target", lambda a: a.index_put((MASK(a),), torch.tensor(True).to(a.device)), [[(3, 4)]],
           (torch.bool,)),
]


@parametrize(MASK_CASES)
def test_mask_index_put(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_masked_setitem_statement():
    x = torch.randn(5, 4)
    d = x.to("tpu")
    x[x < 0] = 0.0
    d[d < 0] = 0.0
    torch.testing.assert_close(d.cpu(), x)


MASK_READS = [
    ("whole", lambda m: (m,)),
    ("rows", lambda m: (m[:, 0],)),
    ("cols_after_slice", lambda m: (slice(None), m[0])),
    ("uint8_rows", lambda m: (m[:, 1].to(torch.uint8),)),
    ("with_int_index", lambda m: (m[:, 2], 1)),
]


@pytest.mark.parametrize("name,make", MASK_READS, ids=[n for n, _ in MASK_READS])
@pytest.mark.parametrize("dtype", (torch.float32, torch.int64, torch.bool))
def test_bool_mask_read_is_native(name, make, dtype):
    """x[mask]: one host count (as on CUDA), then a native gather."""
    import torch_tpu
    torch_tpu.reset_fallback_ops()
    x = (torch.arange(20).reshape(4, 5) % 7).to(dtype)
    m = torch.arange(20).reshape(4, 5) % 3 == 0
    idx = make(m)
    moved = tuple(i.to("tpu") if isinstance(i, torch.Tensor) else i for i in idx)
    torch.testing.assert_close(x.to("tpu")[moved].cpu(), x[idx])
    assert torch_tpu.fallback_ops() == {}


def test_bool_mask_read_backward():
    x = torch.randn(4, 5, requires_grad=True)
    d = x.detach().to("tpu").requires_grad_()
    for t in (x, d):
        (t[t.detach() > 0] * 3).sum().backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad)


def test_bool_mask_shape_mismatch_raises_like_cpu():
    same_error(lambda t, m: t[m], torch.randn(3, 4), torch.tensor([True, False]))
    same_error(lambda t, m: t[m], torch.randn(3, 4), torch.ones(3, 4, 2, dtype=torch.bool))


def test_bad_index_args_raise_like_cpu():
    same_error(lambda t, i: t.index_select(2, i), torch.randn(3, 4), torch.tensor([0]))
    same_error(lambda t, i: t.index_select(0, i), torch.randn(3, 4), torch.tensor([[0]]))
    same_error(lambda t, i: t.index_select(0, i), torch.randn(3, 4), torch.tensor([0.5]))
    same_error(lambda t, i: t.gather(0, i), torch.randn(3, 4), torch.zeros(2, 2, 2, dtype=torch.long))
    same_error(lambda t, i, s: t.scatter(0, i, s), torch.randn(3, 4), torch.zeros(2, 5, dtype=torch.long),
               torch.randn(2, 4))
    same_error(lambda t, i, s: t.scatter_reduce(0, i, s, "foo"), torch.randn(3, 4), torch.zeros(1, 4, dtype=torch.long),
               torch.randn(1, 4))
    same_error(lambda t, i, s: t.put(i, s), torch.randn(3, 4), torch.tensor([0, 1]), torch.randn(3))
    same_error(lambda t, i: t.index_fill(0, i, torch.ones(2)), torch.randn(3, 4), torch.tensor([0]))
    same_error(lambda t, i, v: t.index_put((i,), v), torch.randn(3, 4), torch.tensor([0, 1]), torch.randn(3, 4))
    same_error(lambda t, i: t[i, i, i], torch.randn(3, 4), torch.tensor([0]))
    same_error(lambda t, m: t.index_put_((m,), torch.tensor(1.0, device=t.device)), torch.randn(3, 4),
               torch.tensor([True, False]))


def test_index_reduce_rejects_an_unknown_reduction():
    x = torch.zeros(3, device="tpu")
    with pytest.raises(RuntimeError, match="prod, mean, amax or amin"):
        x.index_reduce(0, torch.tensor([0], device="tpu"), torch.ones(1, device="tpu"), "sum")
