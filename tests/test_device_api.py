"""What torch.tpu and torch.accelerator answer for tpu, as torch.cuda does:
memory statistics, capability, pinned memory, generators, layouts, and clear
errors for what tpu tensors cannot be (sparse, quantized)."""
import pytest
import torch
import torch.nn as nn
import torch_tpu  # noqa: F401
from fresh_python import run_snippet


def test_accelerator_memory_api_follows_live_buffers():
    torch.accelerator.empty_cache()
    torch.tpu.synchronize()
    base = torch.accelerator.memory_allocated()
    x = torch.ones(1024, 256, device="tpu")
    torch.tpu.synchronize()
    assert torch.accelerator.memory_allocated() - base == x.numel() * 4
    assert torch.accelerator.max_memory_allocated() >= base + x.numel() * 4
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.tpu.memory_reserved()
    del x
    torch.tpu.synchronize()
    assert torch.accelerator.memory_allocated() == base
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == base


def test_memory_stats_answer_what_torchtitans_memory_monitor_reads():
    # TorchTitan's DeviceMemoryMonitor reads these keys (-1 when missing).
    torch.tpu.reset_peak_memory_stats()
    x = torch.ones(4096, 64, device="tpu")
    torch.tpu.synchronize()
    stats = torch.tpu.memory_stats()
    assert stats["active_bytes.all.peak"] >= x.numel() * 4
    assert stats["active_bytes.all.current"] == torch.tpu.memory_allocated()
    assert stats["reserved_bytes.all.peak"] == torch.tpu.max_memory_reserved()
    assert stats["num_alloc_retries"] == 0
    ooms = stats["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device="tpu")
    assert torch.tpu.memory_stats()["num_ooms"] == ooms + 1
    assert torch.accelerator.memory_stats()["num_ooms"] == ooms + 1
    assert torch.tpu.get_device_properties("tpu:0").total_memory == torch.tpu.mem_get_info()[1]
    del x


def test_assert_async_checks_on_tpu_as_on_cpu():
    # TorchTitan's RoPE checks positions with torch._assert_async.
    torch._assert_async(torch.tensor(3, device="tpu"))
    torch._assert_async(torch.tensor([True], device="tpu"), "never raised")
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="positions out of range"):
            torch._assert_async(torch.tensor(0.0, device=dev), "positions out of range")
        with pytest.raises(RuntimeError, match="single nonzero value"):
            torch._assert_async(torch.tensor(False, device=dev))
        with pytest.raises(RuntimeError, match="more than one value"):
            torch._assert_async(torch.ones(2, device=dev))


def test_mem_get_info_and_summary():
    free, total = torch.tpu.mem_get_info()
    assert 0 <= free <= total and total > 0
    summary = torch.tpu.memory_summary()
    assert "Allocated memory" in summary and "tpu:0" in summary
    assert torch.tpu.memory_summary(abbreviated=True) == summary


def test_device_capability_lists_the_storage_dtypes():
    dtypes = torch.accelerator.get_device_capability("tpu")["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.float8_e4m3fn} <= dtypes
    assert {torch.complex64, torch.complex128} <= dtypes
    assert torch.complex32 not in dtypes


@pytest.mark.parametrize("make", [
    lambda: torch.randn(2, 3, 4, 5).to("tpu"),
    lambda: torch.randn(2, 5, 4, 3).to("tpu").permute(0, 3, 2, 1),
])
def test_contiguous_channels_last_restrides_and_keeps_values(make):
    x = make()
    ref = x.cpu().contiguous(memory_format=torch.channels_last)
    y = x.contiguous(memory_format=torch.channels_last)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert y.stride() == ref.stride()
    torch.testing.assert_close(y.cpu(), ref)
    z = y.clone()  # preserve_format keeps the dense layout
    assert z.stride() == y.cpu().clone().stride()
    torch.testing.assert_close(z.cpu(), ref)
    c = y.contiguous()
    assert c.is_contiguous() and c.stride() == ref.contiguous().stride()
    torch.testing.assert_close(c.cpu(), ref.contiguous())


def test_channels_last_3d_and_clone_of_a_view():
    x = torch.randn(2, 3, 4, 5, 6).to("tpu")
    y = x.contiguous(memory_format=torch.channels_last_3d)
    assert y.stride() == x.cpu().contiguous(memory_format=torch.channels_last_3d).stride()
    torch.testing.assert_close(y.cpu(), x.cpu())
    v = x[:, 1:, ::2]
    torch.testing.assert_close(v.clone().cpu(), x.cpu()[:, 1:, ::2].clone())


def test_randperm_with_a_tpu_generator():
    g = torch.Generator("tpu").manual_seed(3)
    a = torch.randperm(50, device="tpu", generator=g)
    g.manual_seed(3)
    b = torch.randperm(50, device="tpu", generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    assert sorted(a.cpu().tolist()) == list(range(50))
    out = torch.empty(50, dtype=torch.long, device="tpu")
    g.manual_seed(3)
    torch.randperm(50, generator=g, out=out)
    assert torch.equal(out.cpu(), a.cpu())
    with pytest.raises(RuntimeError, match="generator"):
        torch.randperm(5, device="tpu", generator=torch.Generator().manual_seed(0))


def test_manual_seed_before_the_device_starts_is_applied(tmp_path):
    run_snippet(
        """
        import torch, torch_tpu
        torch.manual_seed(5)
        assert not torch_tpu._C._is_initialized()
        a = torch.rand(4, device="tpu").cpu()
        torch.tpu.manual_seed_all(5)
        assert torch.equal(a, torch.rand(4, device="tpu").cpu())
        """,
        cwd=tmp_path, timeout=120)


def test_pin_memory_pins_and_uploads():
    x = torch.randn(1000, 33)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert torch.equal(p, x)
    y = p.to("tpu", non_blocking=True)
    torch.testing.assert_close(y.cpu(), x)
    assert torch.empty(0).pin_memory().numel() == 0
    assert p[3:].is_pinned()  # a view into pinned memory is pinned


def test_host_cache_calls_of_torch_accelerator():
    # vLLM's shutdown calls these; they used to crash once the device was in use.
    torch.ones(2, device="tpu").cpu()
    torch.accelerator.empty_cache()
    torch.accelerator.empty_host_cache()
    p = torch.randn(4096).pin_memory()
    assert p.is_pinned()
    torch.accelerator.empty_host_cache()  # nothing is cached: the live block stays valid
    assert p.is_pinned() and torch.isfinite(p).all()


def test_dataloader_pin_memory_pins_for_tpu():
    ds = torch.utils.data.TensorDataset(torch.arange(40.).reshape(20, 2), torch.arange(20))
    seen = []
    for xb, yb in torch.utils.data.DataLoader(ds, batch_size=8, pin_memory=True):
        assert xb.is_pinned() and yb.is_pinned()
        seen.append((xb.to("tpu", non_blocking=True) * 2).cpu())
    torch.testing.assert_close(torch.cat(seen), torch.arange(40.).reshape(20, 2) * 2)


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, 3, device="tpu").to_sparse(),
    lambda: torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2), (3,)).to("tpu"),
    lambda: torch.randn(3, 3, device="tpu").to_sparse_csr(),
    lambda: torch.randn(3, 3).to_sparse_csr().to("tpu").to_dense(),
    lambda: torch.randn(3, 3).to_sparse_csr().to("tpu") @ torch.ones(3, 1, device="tpu"),
])
def test_sparse_tensors_say_what_to_do(make):
    with pytest.raises(NotImplementedError, match="does not support sparse tensors.*to_dense"):
        make()


def test_sparse_embedding_gradient_says_what_to_do():
    emb = nn.Embedding(10, 4, sparse=True).to("tpu")
    out = emb(torch.tensor([1, 2], device="tpu")).sum()
    with pytest.raises(NotImplementedError, match="sparse=False"):
        out.backward()


def test_quantized_tensors_say_what_to_do():
    q = torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match="does not support quantized tensors.*dequantize"):
        q.to("tpu")
