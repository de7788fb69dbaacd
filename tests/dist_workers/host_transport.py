"""The tpu_dist host transport on large messages (pooled host staging
memory, and on the CPU plugin device buffers that alias the host result),
against gloo on CPU tensors. Run under torchrun, with or without
TORCH_TPU_DIST_ZERO_COPY=0 (which forces the copying path); exits non-zero
on the first mismatch."""

import torch
import torch.distributed as dist

from _common import assert_same, rank_world, report, sample

rank, world = rank_world()
dist.init_process_group("cpu:gloo,tpu:tpu_dist")
TPU = torch.device("tpu")
N = 96 * 1024  # elements: 384 KiB in float32, above the pool's threshold
cases = 0


def check(name, got, want):
    global cases
    assert_same(name, got, want.to(got.dtype))
    cases += 1


# (gloo has no bfloat16 reduction; float16 stands in for the 2-byte floats)
for dtype in (torch.float32, torch.float16, torch.int32, torch.int16):
    # gloo has no int16: its reference runs in int32 (tpu_dist carries int16
    # as int32 too)
    ref = torch.int32 if dtype == torch.int16 else dtype
    x = sample((N,), dtype, seed=rank)
    # Repeated in-place all_reduce with device ops in between, several live
    # results of one size at once: a block the pool hands out again must
    # never still back a live tensor.
    cpu, dev = x.to(ref, copy=True), x.to(TPU)
    kept_cpu, kept_dev = [], []
    for step in range(4):
        dist.all_reduce(cpu)
        dist.all_reduce(dev)
        kept_cpu.append(cpu.clone())
        kept_dev.append(dev.clone())
        cpu.add_(1)
        dev.add_(1)
        tmp_c, tmp_d = cpu * 2, dev * 2  # a second tensor of the same size
        dist.all_reduce(tmp_c)
        dist.all_reduce(tmp_d)
        check(f"all_reduce temp {dtype} step {step}", tmp_d, tmp_c)
    check(f"all_reduce repeated {dtype}", dev, cpu)
    for i, (g, w) in enumerate(zip(kept_dev, kept_cpu)):
        check(f"all_reduce kept {dtype} #{i}", g, w)

    # A view with a storage offset (written back through a device copy)
    # and a non-contiguous view; the rest of the base keeps its values.
    base_d = sample((3, N), dtype, seed=rank + 7).to(TPU)
    base_c = base_d.cpu().to(ref, copy=True)
    dist.all_reduce(base_c[1])
    dist.all_reduce(base_d[1])
    check(f"all_reduce offset view {dtype}", base_d, base_c)
    # (gloo reads a CPU tensor as dense memory: its reference runs on a
    # contiguous copy of the view)
    col_c = base_c[:, 5:].contiguous()
    dist.all_reduce(col_c)
    base_c[:, 5:] = col_c
    dist.all_reduce(base_d[:, 5:])
    check(f"all_reduce strided view {dtype}", base_d, base_c)

    # all_gather_into_tensor and reduce_scatter_tensor, repeated.
    part = sample((N,), dtype, seed=rank + 11)
    out_c = torch.empty(world * N, dtype=ref)
    out_d = torch.empty(world * N, dtype=dtype, device=TPU)
    red_c = torch.empty(N, dtype=ref)
    red_d = torch.empty(N, dtype=dtype, device=TPU)
    part_d, part = part.to(TPU), part.to(ref, copy=True)
    for step in range(3):
        dist.all_gather_into_tensor(out_c, part)
        dist.all_gather_into_tensor(out_d, part_d)
        check(f"all_gather_into_tensor {dtype} step {step}", out_d, out_c)
        dist.reduce_scatter_tensor(red_c, out_c)
        dist.reduce_scatter_tensor(red_d, out_d)
        check(f"reduce_scatter_tensor {dtype} step {step}", red_d, red_c)

    # Asynchronous all_reduce: the result is there once wait() returns.
    a_c, a_d = x.to(ref, copy=True), x.to(TPU)
    dist.all_reduce(a_c)
    dist.all_reduce(a_d, async_op=True).wait()
    check(f"all_reduce async {dtype}", a_d, a_c)

report(rank, cases)
dist.destroy_process_group()
