"""Shape, factory and indexing ops against the CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import ALL, FLOAT, FLOATS, INTS, OpCase, parametrize, run_case, same_error


def index_tensor(hi, shape=(4,)):
    return lambda s, d, i: torch.randint(-hi, hi, shape, generator=torch.Generator().manual_seed(i))


CASES = [
    OpCase("cat", lambda a, b: torch.cat([a, b], 1), [[(2, 3), (2, 4)], [(2, 0), (2, 3)]], ALL, grad=True),
    OpCase("cat_promote", lambda a, b: torch.cat([a, b.double()]), [[(2, 3), (1, 3)]], FLOAT),
    OpCase("stack", lambda a, b: torch.stack([a, b], -1), [[(2, 3), (2, 3)]], FLOATS + INTS, grad=True),
    OpCase("flip", lambda a: a.flip(0, -1), [[(3, 4)], [(2, 3, 4)]], ALL, grad=True),
    OpCase("roll", lambda a: a.roll(2, 1), [[(3, 5)]], FLOATS + INTS, grad=True),
    OpCase("roll_flat", lambda a: a.roll(-3), [[(3, 5)]], FLOAT),
    OpCase("tril", lambda a: a.tril(1), [[(4, 5)], [(2, 3, 3)]], FLOATS + INTS, grad=True,
           inplace=lambda a: a.tril_(1)),
    OpCase("triu", lambda a: a.triu(-1), [[(4, 5)]], FLOATS + INTS + (torch.bool,), grad=True),
    OpCase("pad", lambda a: F.pad(a, (1, 2, 0, 3), value=1.5), [[(2, 3, 4)]], FLOATS, grad=True),
    OpCase("pad_crop", lambda a: F.pad(a, (-1, 2)), [[(2, 5)]], FLOATS + INTS),
    OpCase("index_select", lambda a: a.index_select(1, torch.tensor([2, 0, 2]).to(a.device)),
           [[(3, 4)], [(2, 3, 5)]], ALL, grad=True),
    OpCase("gather", lambda a: a.gather(1, torch.tensor([[0, 2], [1, 1], [3, 0]]).to(a.device)), [[(3, 4)]],
           FLOATS + INTS, grad=True),
    OpCase("scatter", lambda a, s: a.scatter(0, torch.tensor([[2, 0, 1]]).to(a.device), s), [[(3, 3), (1, 3)]],
           FLOATS + INTS),
    OpCase("scatter_add", lambda a, s: a.scatter_add(1, torch.tensor([[0, 0], [2, 1]]).to(a.device), s),
           [[(2, 3), (2, 2)]], FLOATS + INTS, grad=True),
    OpCase("scatter_value", lambda a: a.scatter(1, torch.tensor([[1], [0]]).to(a.device), 7.0), [[(2, 3)]],
           FLOATS),
    OpCase("advanced_index", lambda a: a[torch.tensor([2, 0, -1]).to(a.device)], [[(4, 3)]], ALL, grad=True),
    OpCase("advanced_index_2", lambda a: a[:, torch.tensor([[0, 1], [1, 2]]).to(a.device), 1],
           [[(2, 3, 4)]], FLOATS, grad=True),
    OpCase("advanced_index_split", lambda a: a[torch.tensor([0, 1]).to(a.device), :, torch.tensor([2, 3]).to(a.device)],
           [[(2, 3, 4)]], FLOATS, grad=True),
    OpCase("index_put_accumulate", lambda a, v: a.index_put((torch.tensor([0, 0, 2]).to(a.device),), v, True),
           [[(3, 4), (3, 4)]], FLOATS, grad=True),
    OpCase("embedding", lambda w: F.embedding(torch.tensor([[1, 3], [3, 0]]).to(w.device), w, padding_idx=0),
           [[(5, 3)]], FLOATS, grad=True),
]


@parametrize(CASES)
def test_shape_ops(case, shapes, dtype):
    run_case(case, shapes, dtype)


@pytest.mark.parametrize("fn", [
    lambda d: torch.arange(7, device=d), lambda d: torch.arange(1.5, 4.0, 0.5, device=d),
    lambda d: torch.arange(10, 0, -3, device=d), lambda d: torch.eye(3, 5, device=d),
    lambda d: torch.eye(4, dtype=torch.int32, device=d), lambda d: torch.linspace(-2, 3, 11, device=d),
    lambda d: torch.linspace(0, 1, 1, device=d), lambda d: torch.full((2, 3), 2.5, device=d),
    lambda d: torch.zeros(2, 0, device=d), lambda d: torch.ones(3, dtype=torch.bool, device=d),
    lambda d: torch.linspace(0, 10, 7, dtype=torch.int64, device=d),
    lambda d: torch.linspace(-7.9, 5.5, 9, dtype=torch.int32, device=d),
    lambda d: torch.linspace(100, -3, 13, dtype=torch.int16, device=d),
    lambda d: torch.linspace(0, 255, 10, dtype=torch.uint8, device=d),
])
def test_factories(fn):
    torch.testing.assert_close(fn("tpu").cpu(), fn("cpu"))


def test_out_forms_of_factories():
    out = torch.empty(0, device="tpu")
    torch.arange(4.0, out=out)
    torch.testing.assert_close(out.cpu(), torch.arange(4.0))
    torch.eye(2, 3, out=out)
    torch.testing.assert_close(out.cpu(), torch.eye(2, 3))


def test_setitem_with_index_tensor():
    x = torch.zeros(4, 3)
    d = x.to("tpu")
    idx = torch.tensor([3, 1])
    x[idx] = 2.0
    d[idx.to("tpu")] = 2.0
    torch.testing.assert_close(d.cpu(), x)


def test_bad_index_args_raise_like_cpu():
    same_error(lambda t, i: t.index_select(2, i), torch.randn(3, 4), torch.tensor([0]))
    same_error(lambda t, i: t.gather(0, i), torch.randn(3, 4), torch.zeros(2, 2, 2, dtype=torch.long))
    same_error(lambda t, u: torch.cat([t, u]), torch.randn(3, 4), torch.randn(3, 5))
