"""Advanced indexing of a tpu tensor with index or mask tensors on the CPU:
the indices move to the device, as CUDA moves them (reads, writes,
accumulating writes, masks, and nn.init.sparse_, which indexes with a CPU
randperm)."""
import pytest
import torch
import torch.nn as nn
import torch_tpu  # noqa: F401

DTYPES = [torch.float32, torch.bfloat16, torch.int64]


def _x(dtype):
    return (torch.arange(5 * 4 * 4) - 20).reshape(5, 4, 4).to(dtype)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", [
    lambda: (torch.tensor([1, 3, 3]),),
    lambda: (torch.tensor([[0, 4], [2, 1]]),),
    lambda: (slice(None), torch.tensor([0, 3])),
    lambda: (torch.tensor([0, 2]), torch.tensor([1, 3])),
    lambda: (torch.tensor([True, False, True, False, True]),),
    lambda: (torch.tensor([[True, False, True, False]] * 5),),
    lambda: (torch.tensor(2),),
    lambda: (torch.tensor([], dtype=torch.long),),
], ids=["list", "2d", "second-dim", "pair", "mask", "2d-mask", "0d", "empty"])
def test_read_write_and_accumulate_with_cpu_indices(index, dtype, mode):
    cpu = _x(dtype)
    with torch_tpu.eager_mode(mode):
        tpu = cpu.to("tpu")
        torch.testing.assert_close(tpu[index()].cpu(), cpu[index()])
        # through a view of the tpu tensor
        torch.testing.assert_close(tpu.transpose(1, 2)[index()].cpu(), cpu.transpose(1, 2)[index()])
        ref, out = cpu.clone(), tpu.clone()
        ref[index()] = 7
        out[index()] = 7
        torch.testing.assert_close(out.cpu(), ref)
        if all(isinstance(i, torch.Tensor) for i in index()):
            vals = torch.ones_like(cpu[index()])
            ref.index_put_(index(), vals, accumulate=True)
            out.index_put_(index(), vals.to("tpu"), accumulate=True)
            torch.testing.assert_close(out.cpu(), ref)


def test_cpu_index_gradient():
    w = torch.randn(6, 3, requires_grad=True)
    wt = w.detach().to("tpu").requires_grad_()
    idx = torch.tensor([0, 5, 5, 2])
    (w[idx] * 2).sum().backward()
    (wt[idx] * 2).sum().backward()
    torch.testing.assert_close(wt.grad.cpu(), w.grad)


def test_sparse_init_on_tpu():
    torch.manual_seed(0)
    w = torch.empty(10, 6, device="tpu")
    nn.init.sparse_(w, sparsity=0.5)
    zeros_per_column = (w.cpu() == 0).sum(0)
    assert (zeros_per_column == 5).all()


def test_bad_cpu_mask_raises_pytorchs_error():
    x = torch.randn(3, device="tpu")
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.tensor([True, False])]
