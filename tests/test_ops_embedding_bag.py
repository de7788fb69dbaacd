"""EmbeddingBag (aten::_embedding_bag, _embedding_bag_forward_only and the
backward ops): sum / mean / max bags from offsets or 2-D input,
include_last_offset, per_sample_weights, padding_idx, empty bags,
scale_grad_by_freq, compared with the CPU forward and backward; an
nn.EmbeddingBag trains on tpu without CPU fallback. Bad indices and offsets
are device checks (tests/test_device_checks.py)."""
import torch
import torch.nn.functional as F

import torch_tpu
from optest import FLOATS, OpCase, parametrize, run_case, same_error

IDX = [1, 2, 4, 5, 4, 3, 2, 9, 0, 7]
# The CPU's sum/mean backward with scale_grad_by_freq divides the i-th
# distinct index's gradient by the count of sorted_indices[i] rather than of
# that index (EmbeddingBag.cpp, _embedding_bag_dense_backward_cpu_sum_mean);
# tpu divides by the index's own count, as CUDA does. With every index
# occurring equally often the two agree: these rows use such indices.
IDX_EVEN = [1, 2, 4, 5, 4, 1, 2, 5]
ALL_FLOATS = FLOATS + (torch.float64,)
TOLS = dict(rtol=2e-2, atol=2e-2)


def _t(values, dev):
    return torch.tensor(values, device=dev)


def bag(mode, offsets=(0, 4, 4, 7), last=False, padding_idx=None, scale=False, idx=IDX):
    def fn(w):
        i = torch.tensor(idx, dtype=torch.long, device=w.device)
        return F.embedding_bag(i, w, _t(list(offsets), w.device), mode=mode, include_last_offset=last, padding_idx=padding_idx, scale_grad_by_freq=scale)
    return fn


def bag_2d(mode, padding_idx=None):
    def fn(w):
        return F.embedding_bag(_t([[1, 2, 4], [5, 4, 3], [2, 9, 1]], w.device), w, mode=mode, padding_idx=padding_idx)
    return fn


def bag_weighted(last=False, padding_idx=None):
    def fn(w, psw):
        off = [0, 3, 8, 10] if last else [0, 3, 8]
        return F.embedding_bag(_t(IDX, w.device), w, _t(off, w.device), mode="sum", per_sample_weights=psw,
                               include_last_offset=last, padding_idx=padding_idx)
    return fn


def aux_outputs(mode):
    """All four results of aten::_embedding_bag (offset2bag, bag_size and
    max_indices are the CPU's for mean and max bags without a last offset)."""
    def fn(w):
        return torch.ops.aten._embedding_bag(w, _t(IDX, w.device), _t([0, 0, 4, 7], w.device), False, mode, False,
                                             None, False, 4)
    return fn


W = [[(10, 3)]]
W2 = [[(10, 3)], [(12, 5)]]
WEIGHTED = [[(10, 3), (10,)]]

CASES = [
    OpCase("embedding_bag_sum", bag("sum"), W2, ALL_FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_mean", bag("mean"), W2, ALL_FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_max", bag("max"), W2, ALL_FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_2d_sum", bag_2d("sum"), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_2d_mean_padding", bag_2d("mean", padding_idx=4), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_2d_max_padding", bag_2d("max", padding_idx=2), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_last_offset_sum", bag("sum", (0, 2, 2, 10), last=True), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_last_offset_mean", bag("mean", (0, 3, 10), last=True), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_last_offset_max", bag("max", (0, 3, 3, 10), last=True), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_padding_sum", bag("sum", padding_idx=4), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_padding_mean_empty", bag("mean", (0, 1, 5), padding_idx=1), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_scale_grad", bag("sum", (0, 3, 3, 5), scale=True, idx=IDX_EVEN), W, FLOATS, grad=True,
           **TOLS),
    OpCase("embedding_bag_mean_scale_grad", bag("mean", (0, 3, 3, 5), scale=True, idx=IDX_EVEN), W, FLOATS,
           grad=True, **TOLS),
    OpCase("embedding_bag_empty_input", bag("sum", (0, 0), idx=[]), W, FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_weighted", bag_weighted(), WEIGHTED, ALL_FLOATS, grad=True, **TOLS),
    OpCase("embedding_bag_weighted_last_padding", bag_weighted(last=True, padding_idx=2), WEIGHTED, FLOATS,
           grad=True, **TOLS),
    OpCase("embedding_bag_aux_max", aux_outputs(2), W, ALL_FLOATS, **TOLS),
]


@parametrize(CASES)
def test_embedding_bag(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_max_ties_and_nan_pick_the_cpus_row():
    w = torch.tensor([[1.0, 2.0], [1.0, float("nan")], [3.0, 2.0], [0.5, float("nan")]])
    idx, off = torch.tensor([0, 1, 2, 3, 0, 2]), torch.tensor([0, 4])
    cpu = torch.ops.aten._embedding_bag(w, idx, off, False, 2, False, None, False, -1)
    tpu = torch.ops.aten._embedding_bag(w.to("tpu"), idx.to("tpu"), off.to("tpu"), False, 2, False, None, False, -1)
    torch.testing.assert_close(tpu[0].cpu(), cpu[0], equal_nan=True)
    torch.testing.assert_close(tpu[3].cpu(), cpu[3])


def test_embedding_bag_module_trains_natively():
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
    head = torch.nn.Linear(6, 3)
    dev = torch.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    head_dev = torch.nn.Linear(6, 3).to("tpu")
    head_dev.load_state_dict(head.state_dict())
    params = lambda m, h: list(m.parameters()) + list(h.parameters())  # noqa: E731
    opt_c, opt_d = torch.optim.SGD(params(cpu, head), lr=0.5), torch.optim.SGD(params(dev, head_dev), lr=0.5)
    g = torch.Generator().manual_seed(1)
    torch_tpu.reset_fallback_ops()
    for _ in range(3):
        x = torch.randint(0, 20, (4, 5), generator=g)
        y = torch.randint(0, 3, (4,), generator=g)
        for m, h, opt, d in ((cpu, head, opt_c, "cpu"), (dev, head_dev, opt_d, "tpu")):
            opt.zero_grad()
            loss = F.cross_entropy(h(m(x.to(d))), y.to(d))
            loss.backward()
            opt.step()
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach(), rtol=1e-5, atol=1e-5)
    assert torch_tpu.fallback_ops() == {}


def test_bad_arguments_raise():
    w = torch.randn(10, 3)
    same_error(F.embedding_bag, torch.tensor([1, 2]), w, torch.tensor([0]), None, 2.0, False, "max", False,
               torch.ones(2))
    same_error(lambda i, w, o: torch.ops.aten._embedding_bag(w, i, o), torch.tensor([1.0]), w, torch.tensor([0]))
