"""torch._grouped_mm (mixture-of-experts' grouped matmul): every layout
(2D x 3D, 3D x 2D and 2D x 2D with offs, 3D x 3D without), groups that are
empty, uneven or longer than one tile, forward and backward, compared with
the CPU in every mode; proof that forward and backward run as the native
rule (no per-group mm, no read of offs to the host); bad input."""
import pytest
import torch

from optest import AtenOpLog, OpCase, parametrize, run_case, same_error

BF16 = (torch.bfloat16,)
TOLS = dict(rtol=2e-2, atol=2e-2)  # bf16 results rounded once; the CPU's per-group mm rounds the same way


def gmm(x, w, offs=None):
    return torch._grouped_mm(x, w, offs=offs)


def with_offs(ends):
    """make() for a row whose third input is offs = `ends` (int32)."""
    def make(shape, dtype, i):
        if i == 2:
            assert shape == (len(ends),)
            return torch.tensor(ends, dtype=torch.int32)
        g = torch.Generator().manual_seed(i)
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)
    return make


def case(name, shapes, ends=None, dtypes=BF16, **kw):
    make = with_offs(ends) if ends is not None else None
    return OpCase(name, gmm, [shapes], dtypes, grad=True, make=make, **TOLS, **kw)


# PyTorch's meta kernel for _grouped_mm takes bfloat16 only (the CPU kernel
# also float32 and float16), so Dynamo cannot trace other dtypes on any device.
NO_COMPILE = {"compile": "PyTorch's _grouped_mm meta kernel (used by torch.compile) takes bfloat16 only"}


CASES = [
    # 2D x 3D: tokens (M, K) sorted by expert, expert weights (G, K, N).
    case("gmm_2d3d_even", [(16, 8), (4, 8, 16), (4,)], [4, 8, 12, 16]),
    case("gmm_2d3d_empty_groups", [(16, 8), (4, 8, 16), (4,)], [0, 5, 5, 16]),
    case("gmm_2d3d_one_group", [(16, 8), (3, 8, 8), (3,)], [16, 16, 16]),
    # Groups longer than one tile (256 rows) and a group boundary inside a tile.
    case("gmm_2d3d_multi_tile", [(600, 8), (3, 8, 8), (3,)], [300, 300, 600]),
    # 3D x 2D: mat2's columns grouped.
    case("gmm_3d2d", [(3, 8, 16), (16, 24), (3,)], [8, 8, 24]),
    # 2D x 2D: the contraction grouped (the weight gradient of 2D x 3D).
    case("gmm_2d2d", [(8, 24), (24, 16), (3,)], [8, 8, 24]),
    case("gmm_2d2d_multi_tile", [(8, 528), (528, 8), (2,)], [264, 528]),
    # 3D x 3D: a batched matmul.
    case("gmm_3d3d", [(3, 8, 16), (3, 16, 8)]),
    # float32 and float16, as transformers' MoE calls it on tpu (eager modes).
    case("gmm_2d3d_float", [(16, 8), (4, 8, 16), (4,)], [0, 5, 5, 16], dtypes=(torch.float32, torch.float16),
         skip_modes=NO_COMPILE),
    case("gmm_2d2d_float", [(8, 24), (24, 16), (3,)], [8, 8, 24], dtypes=(torch.float32,), skip_modes=NO_COMPILE),
]


@parametrize(CASES)
def test_grouped_mm(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_grouped_mm_runs_natively_both_ways():
    """TorchTitan's MoE call: forward and backward are _grouped_mm calls (no
    per-group mm, no offs read back), each one program, none on the CPU."""
    import torch_tpu
    x = torch.randn(32, 16, dtype=torch.bfloat16, device="tpu", requires_grad=True)
    w = torch.randn(4, 16, 8, dtype=torch.bfloat16, device="tpu", requires_grad=True)
    offs = torch.tensor([8, 8, 20, 32], dtype=torch.int32, device="tpu")
    with AtenOpLog() as log:
        out = torch._grouped_mm(x, w.transpose(-2, -1).contiguous().transpose(-2, -1), offs=offs)
        out.backward(torch.ones_like(out))
    assert log.ops.count("_grouped_mm") == 3, log.ops
    assert not {"mm", "bmm", "_local_scalar_dense", "item"} & set(log.ops), log.ops
    assert torch_tpu.fallback_ops() == {}
    assert "aten::_grouped_mm" in torch_tpu.lowered_ops()


def test_grouped_mm_rows_past_the_last_offset_are_zero():
    # The CPU leaves them unwritten; tpu writes zeros.
    x = torch.randn(16, 8, dtype=torch.bfloat16)
    w = torch.randn(2, 8, 8, dtype=torch.bfloat16)
    offs = torch.tensor([4, 10], dtype=torch.int32)
    out = torch._grouped_mm(x.to("tpu"), w.to("tpu"), offs=offs.to("tpu")).cpu()
    assert torch.equal(out[10:], torch.zeros(6, 8, dtype=torch.bfloat16))
    torch.testing.assert_close(out[:10], torch._grouped_mm(x, w, offs=offs)[:10])


@pytest.mark.parametrize("name,args", [
    ("offs_int64", lambda: (torch.randn(16, 8).bfloat16(), torch.randn(2, 8, 8).bfloat16(),
                            torch.tensor([8, 16]))),
    ("no_offs_2d", lambda: (torch.randn(16, 8).bfloat16(), torch.randn(2, 8, 8).bfloat16(), None)),
    ("offs_3d3d", lambda: (torch.randn(2, 8, 8).bfloat16(), torch.randn(2, 8, 8).bfloat16(),
                           torch.tensor([8, 16], dtype=torch.int32))),
    ("contraction_mismatch", lambda: (torch.randn(16, 8).bfloat16(), torch.randn(2, 16, 8).bfloat16(),
                                      torch.tensor([8, 16], dtype=torch.int32))),
    ("groups_mismatch", lambda: (torch.randn(16, 8).bfloat16(), torch.randn(3, 8, 8).bfloat16(),
                                 torch.tensor([8, 16], dtype=torch.int32))),
    ("one_dim", lambda: (torch.randn(16).bfloat16(), torch.randn(2, 16, 8).bfloat16(),
                         torch.tensor([8, 16], dtype=torch.int32))),
    # float32 calls are checked by the rule itself (the meta kernel refuses them).
    ("float64", lambda: (torch.randn(16, 8).double(), torch.randn(2, 8, 8).double(),
                         torch.tensor([8, 16], dtype=torch.int32))),
    ("mixed_dtypes", lambda: (torch.randn(16, 8), torch.randn(2, 8, 8).bfloat16(),
                              torch.tensor([8, 16], dtype=torch.int32))),
    ("float_offs_int64", lambda: (torch.randn(16, 8), torch.randn(2, 8, 8), torch.tensor([8, 16]))),
    ("float_groups_mismatch", lambda: (torch.randn(16, 8), torch.randn(3, 8, 8),
                                       torch.tensor([8, 16], dtype=torch.int32))),
    ("float_contraction_mismatch", lambda: (torch.randn(16, 8), torch.randn(2, 16, 8),
                                            torch.tensor([8, 16], dtype=torch.int32))),
    ("float_no_offs_2d", lambda: (torch.randn(16, 8), torch.randn(2, 8, 8), None)),
])
def test_grouped_mm_bad_input_raises_like_cpu(name, args):
    same_error(gmm, *args())


def test_grouped_mm_bias_raises_like_cpu():
    x, w = torch.randn(16, 8).bfloat16(), torch.randn(2, 8, 8).bfloat16()
    offs, bias = torch.tensor([8, 16], dtype=torch.int32), torch.zeros(2, 8).bfloat16()
    same_error(lambda x, w, o, b: torch._grouped_mm(x, w, offs=o, bias=b), x, w, offs, bias)
