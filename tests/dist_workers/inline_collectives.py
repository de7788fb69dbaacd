"""Small collectives that ride in the agreement exchange (csrc/backend/distributed/
inline_collectives.h) and the sizes around its capacity (64 KiB, and up to
1 MiB once a collective of that size ran), against gloo on CPU tensors.
Integer-valued floats keep sums exact in any order, so every result must
equal gloo's. Run under torchrun, with or without TORCH_TPU_DIST_CHECK=0
(no exchange: every collective goes through gloo); exits non-zero on the
first mismatch."""

import torch
import torch.distributed as dist

from _common import assert_same, rank_world, report, sample

rank, world = rank_world()
dist.init_process_group("cpu:gloo,tpu:tpu_dist")
TPU = torch.device("tpu")
R = dist.ReduceOp
KIB = 1024
cases = 0


def values(numel, dtype, seed):
    if dtype.is_floating_point:
        return sample((numel,), torch.int64, seed).to(dtype)
    return sample((numel,), dtype, seed)


def check(name, got, want):
    global cases
    assert_same(name, got, want.to(got.dtype))
    cases += 1


def round_trip(nbytes, dtype, op):
    """all_reduce, all_gather (single and list), reduce_scatter (single and
    list) and broadcast of a message of `nbytes` per rank."""
    numel = nbytes // torch.empty((), dtype=dtype).element_size()
    numel -= numel % world
    tag = f"{nbytes} B {dtype} {op}"
    # gloo has no int16: its reference runs in int32 (tpu_dist carries int16 as int32 too)
    ref = torch.int32 if dtype == torch.int16 else dtype
    d = values(numel, dtype, seed=rank).to(TPU)
    x = d.cpu().to(ref)
    c = x.clone()
    dist.all_reduce(c, op=op)
    dist.all_reduce(d, op=op)
    check(f"all_reduce {tag}", d, c)
    # again, in place on the result (a zero-copy write-back read back)
    dist.all_reduce(c, op=op)
    dist.all_reduce(d, op=op)
    check(f"all_reduce twice {tag}", d, c)

    xd = x.to(TPU, dtype)
    out_c = torch.empty(world * numel, dtype=ref)
    out_d = torch.empty(world * numel, dtype=dtype, device=TPU)
    dist.all_gather_into_tensor(out_c, x)
    dist.all_gather_into_tensor(out_d, xd)
    check(f"all_gather_into_tensor {tag}", out_d, out_c)
    outs_c = [torch.empty_like(x) for _ in range(world)]
    outs_d = [torch.empty_like(xd) for _ in range(world)]
    dist.all_gather(outs_c, x)
    dist.all_gather(outs_d, xd)
    for i in range(world):
        check(f"all_gather #{i} {tag}", outs_d[i], outs_c[i])

    part = numel // world
    red_c = torch.empty(part, dtype=ref)
    red_d = torch.empty(part, dtype=dtype, device=TPU)
    dist.reduce_scatter_tensor(red_c, x, op=op)
    dist.reduce_scatter_tensor(red_d, xd, op=op)
    check(f"reduce_scatter_tensor {tag}", red_d, red_c)
    ins = list(x.split(part))
    dist.reduce_scatter(red_c, ins, op=op)
    dist.reduce_scatter(red_d, [t.to(TPU, dtype) for t in ins], op=op)
    check(f"reduce_scatter {tag}", red_d, red_c)

    b_c, b_d = x.clone(), x.to(TPU, dtype)
    dist.broadcast(b_c, src=world - 1)
    dist.broadcast(b_d, src=world - 1)
    check(f"broadcast {tag}", b_d, b_c)


# Around the exchange's capacity (per block: all_gather's input, all_reduce's
# and reduce_scatter's share per rank): 64 KiB fits from the start; a block
# of up to 1 MiB grows it for the next collective; a larger block, or one
# after a larger one, goes through gloo after the check (all_to_all for
# all_gather and reduce_scatter). Sizes alternate so every transition is
# crossed, 4 MiB past the limit at any world size.
sizes = [4 * KIB, 64 * KIB, 64 * KIB + 64, 1024 * KIB, 256 * KIB, 1024 * KIB + 64, 64 * KIB, 4096 * KIB,
         3 * KIB, 4096 * KIB]
for nbytes in sizes:
    round_trip(nbytes, torch.float32, R.SUM)
# all_reduce by shares whose last share is padded (numel not a multiple of
# the world size), and a message of fewer elements than ranks.
for numel in (40_001, 300_007, 1):
    for op in (R.SUM, R.MAX):
        d = values(numel, torch.float32, seed=rank + 7).to(TPU)
        c = d.cpu()
        dist.all_reduce(c, op=op)
        dist.all_reduce(d, op=op)
        check(f"all_reduce {numel} elements {op}", d, c)
for op in (R.PRODUCT, R.MIN, R.MAX):
    round_trip(4 * KIB, torch.float32, op)
for dtype in (torch.int16, torch.int64, torch.float16):
    round_trip(8 * KIB, dtype, R.SUM)
    round_trip(8 * KIB, dtype, R.MAX)
# bool: gloo's SUM and MAX are or, MIN is and
b = sample((64,), torch.bool, seed=rank)
for op in (R.SUM, R.MIN, R.MAX):
    c, d = b.clone(), b.to(TPU)
    dist.all_reduce(c, op=op)
    dist.all_reduce(d, op=op)
    check(f"all_reduce bool {op}", d, c)
# an empty message, reduced and gathered
e = torch.empty(0, device=TPU)
dist.all_reduce(e)
dist.all_gather([torch.empty(0, device=TPU) for _ in range(world)], e)
dist.all_gather_into_tensor(torch.empty(0, device=TPU), e)
# all_gather_into_tensor coalesced (one packed all_gather), small and past the room
xs = [values(n, torch.float32, seed=rank + 3) for n in (5, 300_000)]
want = [torch.empty(world * x.numel()) for x in xs]
for w, x in zip(want, xs):
    dist.all_gather_into_tensor(w, x)
got = [torch.empty(world * x.numel(), device=TPU) for x in xs]
with dist._coalescing_manager(device=TPU):
    for g, x in zip(got, xs):
        dist.all_gather_into_tensor(g, x.to(TPU))
for i, (g, w) in enumerate(zip(got, want)):
    check(f"all_gather_into_tensor coalesced #{i}", g, w)
dist.barrier()

report(rank, cases)
dist.destroy_process_group()
