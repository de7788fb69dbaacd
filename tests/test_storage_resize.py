"""UntypedStorage.resize_ and `param.data = other` on tpu, as on CPU: the
storage plumbing that FSDP2 uses to free and re-allocate unsharded
parameters, and to move a CPU-built module onto the device."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("nbytes", [0, 8, 16, 64])
def test_storage_resize_keeps_leading_bytes(dtype, nbytes):
    base = torch.arange(8).to(dtype)
    got = base.to("tpu")
    want = base.clone()
    for t in (got, want):
        t.untyped_storage().resize_(nbytes)
        assert t.untyped_storage().nbytes() == nbytes
    n = min(nbytes, 8 * base.itemsize) // base.itemsize
    # The leading bytes survive; the CPU's grown tail is uninitialised.
    view = lambda t: t.new_empty(0).set_(t.untyped_storage(), 0, (n,), (1,))  # noqa: E731
    assert torch.equal(view(got).cpu(), view(want))


def test_storage_free_then_realloc_and_write():
    # FSDP2's cycle: free the storage (resize_ to 0), grow it back, write all.
    x = torch.randn(3, 4, device="tpu")
    x.untyped_storage().resize_(0)
    assert x.untyped_storage().nbytes() == 0 and x.shape == (3, 4)
    x.untyped_storage().resize_(x.numel() * x.itemsize)
    src = torch.randn(3, 4)
    x.copy_(src)
    assert torch.equal(x.cpu(), src)
    with torch.no_grad():
        x.mul_(2)
    assert torch.equal(x.cpu(), src * 2)


def test_storage_resize_of_a_view_reaches_every_tensor_on_it():
    x = torch.arange(6.0, device="tpu")
    y = x[2:]
    x.untyped_storage().resize_(0)
    assert y.untyped_storage().nbytes() == 0
    x.untyped_storage().resize_(24)
    x.copy_(torch.ones(6))
    assert torch.equal(y.cpu(), torch.ones(4))


def test_storage_resize_bad_input():
    x = torch.ones(2, device="tpu")
    with pytest.raises(RuntimeError):
        x.untyped_storage().resize_(-1)


def test_set_data_between_cpu_and_tpu():
    p = torch.nn.Parameter(torch.randn(3, 2))
    want = p.detach().clone()
    p.data = p.data.to("tpu")
    assert p.device.type == "tpu" and isinstance(p, torch.nn.Parameter) and p.requires_grad
    (p * 3).sum().backward()
    assert torch.equal(p.grad.cpu(), torch.full((3, 2), 3.0))
    assert torch.equal(p.detach().cpu(), want)
    p.data = torch.zeros(3, 2)
    assert p.device.type == "cpu" and torch.equal(p.detach(), torch.zeros(3, 2))


def test_set_data_refuses_other_layouts():
    p = torch.zeros(2, 2, device="tpu")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        p.data = torch.zeros(2, 2).to_sparse()
