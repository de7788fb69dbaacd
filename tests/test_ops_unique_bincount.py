"""Ops whose result size depends on the data (one host read each): unique
(_unique2, _unique), unique_consecutive, bincount and repeat_interleave with
tensor repeats, against the CPU."""
import pytest
import torch

from optest import FLOATS, INTS, OpCase, parametrize, run_case, same_error

SHAPES = [[(5, 4)], [(7,)], [()], [(0, 3)], [(2, 3, 4)]]


def few_values(shape, dtype, i):
    """Small range so values repeat and runs form."""
    g = torch.Generator().manual_seed(i + 9)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    return torch.randint(-3, 4, shape, generator=g).to(dtype)


def with_nan(shape, dtype, i):
    t = few_values(shape, dtype, i)
    t.view(-1)[::3] = float("nan")
    return t


def counts_input(shape, dtype, i):
    g = torch.Generator().manual_seed(i + 4)
    if i == 0:
        return torch.randint(0, 9, shape, generator=g).to(dtype)
    return torch.rand(shape, generator=g).to(dtype)  # weights


def repeats_input(shape, dtype, i):
    g = torch.Generator().manual_seed(i + 6)
    if i == 1:
        return torch.randint(0, 4, shape, generator=g)  # repeats
    return torch.randn(shape, generator=g).to(dtype)


ALL = FLOATS + INTS + (torch.uint8, torch.bool)
# Every row's result size depends on the data: Dynamo breaks the graph at the
# op and runs it eagerly, so there is no compiled program to test.
DATA_DEPENDENT = {"compile": "data-dependent result size: Dynamo runs the op eagerly (a graph break)"}
CASES = [
    OpCase("unique", lambda x: torch.unique(x), SHAPES, ALL, make=few_values),
    OpCase("unique_inverse_counts", lambda x: torch.unique(x, return_inverse=True, return_counts=True), SHAPES, ALL,
           make=few_values),
    OpCase("unique_unsorted", lambda x: torch.unique(x, sorted=False, return_inverse=True), SHAPES[:2], INTS,
           make=few_values),
    OpCase("unique_nan", lambda x: torch.unique(x, return_counts=True), [[(9,)]], (torch.float32,), make=with_nan),
    OpCase("_unique", lambda x: torch.ops.aten._unique(x, True, True), SHAPES[:3], (torch.float32, torch.int64),
           make=few_values),
    OpCase("unique_consecutive", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
           SHAPES, ALL, make=few_values),
    OpCase("unique_consecutive_plain", lambda x: torch.unique_consecutive(x), SHAPES[:2], (torch.float32,),
           make=few_values),
    OpCase("bincount", lambda x: torch.bincount(x), [[(12,)], [(0,)]], INTS + (torch.uint8, torch.int8),
           make=counts_input, noncontiguous=True),
    OpCase("bincount_minlength", lambda x: torch.bincount(x, minlength=15), [[(12,)], [(0,)]], INTS,
           make=counts_input),
    OpCase("bincount_weights", lambda x, w: torch.bincount(x, w), [[(12,), (12,)]], (torch.int64,),
           make=counts_input),
    OpCase("bincount_float32_weights", lambda x, w: torch.bincount(x, w.float()), [[(12,), (12,)]], (torch.int64,),
           make=counts_input),
    OpCase("bincount_int_weights", lambda x, w: torch.bincount(x, (w * 10).long()), [[(12,), (12,)]],
           (torch.int64,), make=counts_input),
    OpCase("repeat_interleave_counts", lambda r: torch.repeat_interleave(r), [[(6,)], [(0,)]], INTS,
           make=lambda s, d, i: torch.randint(0, 4, s, generator=torch.Generator().manual_seed(3)).to(d)),
    OpCase("repeat_interleave_dim", lambda x, r: x.repeat_interleave(r, dim=0), [[(5, 3), (5,)]], FLOATS + INTS,
           make=repeats_input, grad=True),
    OpCase("repeat_interleave_flat", lambda x, r: x.repeat_interleave(r), [[(2, 2), (4,)]], (torch.float32,),
           make=repeats_input),
    OpCase("repeat_interleave_output_size", lambda r: torch.repeat_interleave(r, output_size=int(r.sum())),
           [[(6,)]], INTS, make=lambda s, d, i: torch.tensor([1, 0, 2, 3, 0, 1], dtype=d)),
]


for _case in CASES:
    _case.skip_modes = DATA_DEPENDENT

@parametrize(CASES)
def test_data_dependent_op(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_unique_in_fused_mode():
    import torch_tpu

    x = torch.tensor([3, 1, 3, 2, 1, 5])
    with torch_tpu.eager_mode("fused"):
        v, inv, cnt = torch.unique((x.to("tpu") * 2), return_inverse=True, return_counts=True)
        b = torch.bincount(x.to("tpu") + 1)
    for got, want in zip((v, inv, cnt, b), (*torch.unique(x * 2, return_inverse=True, return_counts=True),
                                           torch.bincount(x + 1))):
        torch.testing.assert_close(got.cpu(), want)


def test_bad_input_like_cpu():
    same_error(torch.bincount, torch.tensor([-1, 3]))
    same_error(torch.bincount, torch.tensor([[1, 2]]))
    same_error(torch.bincount, torch.tensor([1.0, 2.0]))
    same_error(torch.bincount, torch.tensor([1, 2]), torch.tensor([1.0]))
    same_error(lambda x: torch.bincount(x, minlength=-1), torch.tensor([1]))
    same_error(torch.repeat_interleave, torch.tensor([2, -1]))
    same_error(torch.repeat_interleave, torch.tensor([[2]]))
    same_error(torch.repeat_interleave, torch.tensor([2.0]))


def test_unique_consecutive_along_a_dim_falls_back(allow_fallback):
    import torch_tpu

    x = torch.tensor([[1, 1], [1, 1], [2, 3]])
    got = torch.unique_consecutive(x.to("tpu"), dim=0)
    torch.testing.assert_close(got.cpu(), torch.unique_consecutive(x, dim=0))
    assert "aten::unique_consecutive" in torch_tpu.fallback_ops()
