"""Writes through views that reinterpret a storage's bytes as another dtype
(Tensor.view(dtype)), the layout vLLM uses for its KV caches: one byte buffer,
a float view of each layer's slice. After any sequence of writes and reads,
in either dtype, every byte equals what the CPU holds, in strict eager, fused
eager and under torch.compile."""
import pytest
import torch

import torch_tpu

# (storage dtype, view dtype): narrower to wider, wider to narrower, same
# width, and complex, whose elements are two parts.
PAIRS = [
    (torch.int8, torch.float32),
    (torch.uint8, torch.bfloat16),
    (torch.int16, torch.float64),
    (torch.float32, torch.int32),
    (torch.float32, torch.uint8),
    (torch.int64, torch.float16),
    (torch.float32, torch.complex64),
    (torch.complex64, torch.float32),
]


def _storage(dtype, n, gen):
    if dtype.is_complex:
        return torch.randn(n, dtype=dtype, generator=gen)
    if dtype.is_floating_point:
        return torch.randn(n, generator=gen).to(dtype)
    return torch.randint(-100, 100, (n,), generator=gen).to(dtype)


def _value(dtype, shape, gen):
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=gen)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(0, 100, shape, generator=gen).to(dtype)


def _layers(raw, view_dtype, layers):
    """Each layer's slice of `raw` as a [rows, 4] view of `view_dtype`."""
    per = raw.numel() // layers
    return [raw[i * per:(i + 1) * per].view(view_dtype).view(-1, 4) for i in range(layers)]


def _program(raw, view_dtype, gen_seed):
    """Writes into every layer through the reinterpreting view by index_copy_,
    slice assignment, a strided in-place op and fill_, reading both dtypes in
    between; returns what was read."""
    gen = torch.Generator().manual_seed(gen_seed)
    reads = []
    for step in range(3):
        for layer in _layers(raw, view_dtype, 2):
            rows = layer.shape[0]
            idx = torch.tensor([(step * 3) % rows, rows - 1 - step]).to(raw.device)
            layer.index_copy_(0, idx, _value(view_dtype, (2, 4), gen).to(raw.device))
            layer[1:3] = _value(view_dtype, (2, 4), gen).to(raw.device)
            if not view_dtype.is_complex and view_dtype != torch.uint8:
                layer[::3, 1].add_(1)
            layer[-2, 2:].fill_(step)
            reads.append(layer.sum(0) if view_dtype.is_floating_point or view_dtype.is_complex else layer[0].clone())
        reads.append(raw[:8].clone())
    return reads


def _bytes(t):
    return t.cpu().contiguous().view(torch.uint8)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("storage_dtype,view_dtype", PAIRS, ids=lambda d: str(d).replace("torch.", ""))
def test_writes_through_reinterpreting_views_equal_cpu(storage_dtype, view_dtype, mode):
    gen = torch.Generator().manual_seed(0)
    nbytes = 4 * 8 * 4 * 8  # whole rows of every view dtype in both layers
    raw_cpu = _storage(storage_dtype, nbytes // storage_dtype.itemsize, gen)
    raw_tpu = raw_cpu.to("tpu")
    expected = _program(raw_cpu, view_dtype, 1)
    with torch_tpu.eager_mode(mode):
        got = _program(raw_tpu, view_dtype, 1)
        got = [g.cpu() for g in got]
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, equal_nan=True)
    assert torch.equal(_bytes(raw_tpu), _bytes(raw_cpu))
    # The storage reads back in its own dtype and in the view's, bit for bit.
    assert torch.equal(_bytes(raw_tpu.view(view_dtype)), _bytes(raw_cpu.view(view_dtype)))


def test_bool_view_keeps_other_bytes():
    """A bool view converts values rather than bits: bytes that are not 0/1
    and that the write does not touch keep their value."""
    raw_cpu = torch.tensor([2, 7, 0, 1, 255, 3], dtype=torch.uint8)
    raw_tpu = raw_cpu.to("tpu")
    for raw in (raw_cpu, raw_tpu):
        raw.view(torch.bool)[1:3] = torch.tensor([False, True]).to(raw.device)
    assert torch.equal(raw_tpu.cpu(), raw_cpu)
    assert raw_tpu.cpu().tolist() == [2, 0, 1, 1, 255, 3]


def test_compiled_write_through_reinterpreting_view():
    def step(raw, idx, k):
        cache = raw.view(torch.float32).view(-1, 4)
        cache.index_copy_(0, idx, k)
        return cache.sum()

    raw_cpu = torch.zeros(4 * 16 * 4, dtype=torch.int8)
    raw_tpu = raw_cpu.to("tpu")
    compiled = torch.compile(step, backend="tpu", dynamic=False)
    for i in range(3):
        idx = torch.tensor([i, 15 - i])
        k = torch.randn(2, 4, generator=torch.Generator().manual_seed(i))
        want = step(raw_cpu, idx, k)
        got = compiled(raw_tpu, idx.to("tpu"), k.to("tpu"))
        torch.testing.assert_close(got.cpu(), want)
    assert torch.equal(raw_tpu.cpu(), raw_cpu)


def test_reinterpreting_view_of_odd_byte_count_raises():
    raw = torch.zeros(6, dtype=torch.int8, device="tpu")
    with pytest.raises(RuntimeError):
        raw.view(torch.float32)
