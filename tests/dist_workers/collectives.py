"""Every collective on tpu tensors (tpu_dist) against gloo on CPU tensors,
in one "cpu:gloo,tpu:tpu_dist" group, for every device dtype.

Run under torchrun; exits non-zero on the first mismatch."""

import torch
import torch.distributed as dist

from _common import DTYPES, assert_reduced, assert_same, rank_world, report, sample

rank, world = rank_world()
dist.init_process_group("cpu:gloo,tpu:tpu_dist")
assert dist.get_backend_config() == "cpu:gloo,tpu:tpu_dist", dist.get_backend_config()
TPU = torch.device("tpu")
R = dist.ReduceOp
cases = 0


def gloo_dtype(dtype):
    # gloo has no int16: its reference runs in int32, then narrows (sums,
    # products, min and max wrap the same way).
    return torch.int32 if dtype == torch.int16 else dtype


def both(name, dtype, fn, *inputs, reduced=False):
    """fn(device, *inputs moved there) returns the tensors to compare; the
    CPU run goes through gloo (in int32 for int16), the tpu run through
    tpu_dist. `reduced`: results of a sum or product (assert_reduced)."""
    global cases
    ref_inputs = [[t.to(gloo_dtype(dtype), copy=True) for t in x] if isinstance(x, list)
                  else x.to(gloo_dtype(dtype), copy=True) for x in inputs]
    dev_inputs = [[t.to(TPU) for t in x] if isinstance(x, list) else x.to(TPU) for x in inputs]
    try:
        want = fn(torch.device("cpu"), *ref_inputs)
    except RuntimeError as e:  # gloo refuses it on the CPU: tpu_dist must refuse too
        try:
            fn(TPU, *dev_inputs)
        except RuntimeError:
            cases += 1
            return
        raise AssertionError(f"{name} {dtype}: gloo raised ({e}) but tpu_dist did not")
    got = fn(TPU, *dev_inputs)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.device.type == "tpu", f"{name}: result {i} is on {g.device}"
        if reduced:
            assert_reduced(f"{name} {dtype} #{i}", g, w.to(dtype), world)
        else:
            assert_same(f"{name} {dtype} #{i}", g, w.to(dtype))
    cases += 1


def reduce_ops(dtype):
    if dtype == torch.bool:
        return [R.SUM, R.MIN, R.MAX]  # gloo on bool: or, and, or
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype.is_floating_point:
        ops.append(R.AVG)
    return ops


for dtype in DTYPES:
    x = sample((3, 5), dtype, seed=rank)
    for op in reduce_ops(dtype):
        def all_reduce(dev, t, op=op):
            dist.all_reduce(t, op=op)
            return [t]
        both(f"all_reduce {op}", dtype, all_reduce, x, reduced=op in (R.SUM, R.PRODUCT))

    def all_reduce_view(dev, t):
        # a view of part of a larger tensor: the rest and the base's other
        # views must keep their values
        base = torch.zeros(4, 5, dtype=t.dtype, device=dev)
        base[1:4] = t
        view = base[1:3]
        dist.all_reduce(view)
        return [base]
    both("all_reduce of a view", dtype, all_reduce_view, x, reduced=True)

    def broadcast(dev, t):
        dist.broadcast(t, src=world - 1)
        return [t]
    both("broadcast", dtype, broadcast, x)

    def all_gather(dev, t):
        outs = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(outs, t)
        return outs
    both("all_gather", dtype, all_gather, x)

    def all_gather_single(dev, t):
        out = torch.empty((world * 3, 5), dtype=t.dtype, device=dev)
        dist.all_gather_single(out, t)
        return [out]
    both("all_gather_single", dtype, all_gather_single, x)

    def gather(dev, t):
        outs = [torch.empty_like(t) for _ in range(world)] if rank == 0 else None
        dist.gather(t, outs, dst=0)
        return outs if rank == 0 else [t]
    both("gather", dtype, gather, x)

    def scatter(dev, t):
        ins = [t.clone() if i % 2 else torch.zeros_like(t) for i in range(world)] if rank == 1 else None
        out = torch.empty_like(t)
        dist.scatter(out, ins, src=1)
        return [out]
    both("scatter", dtype, scatter, x)

    def all_to_all_single(dev, t):
        inp = t.repeat(world, 1)
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp)
        return [out]
    both("all_to_all_single", dtype, all_to_all_single, x)

    def all_to_all(dev, t):
        # rank r sends i % 3 + 1 rows to rank i. Gloo's list form needs equal
        # sizes, so the CPU reference is all_to_all_single with splits.
        ins = [t[: (i % 3) + 1].clone() for i in range(world)]
        outs = [torch.empty(((rank % 3) + 1, 5), dtype=t.dtype, device=dev) for _ in range(world)]
        if dev.type == "cpu":
            out = torch.cat(outs)
            dist.all_to_all_single(out, torch.cat(ins), output_split_sizes=[o.shape[0] for o in outs],
                                   input_split_sizes=[i.shape[0] for i in ins])
            return list(out.split([o.shape[0] for o in outs]))
        dist.all_to_all(outs, ins)
        return outs
    both("all_to_all (uneven)", dtype, all_to_all, x)

    if dtype != torch.bool:
        for op in [R.SUM, R.MAX] + ([R.AVG] if dtype.is_floating_point else []):
            def reduce(dev, t, op=op):
                dist.reduce(t, dst=1, op=op)
                return [t] if rank == 1 else []  # non-root values are unspecified
            both(f"reduce {op}", dtype, reduce, x)

            def reduce_scatter(dev, t, op=op):
                ins = [t * (i + 1) for i in range(world)]
                out = torch.empty_like(t)
                dist.reduce_scatter(out, ins, op=op)
                return [out]
            both(f"reduce_scatter {op}", dtype, reduce_scatter, x, reduced=op == R.SUM)

            def reduce_scatter_single(dev, t, op=op):
                inp = t.repeat(world, 1) * 2
                out = torch.empty_like(t)
                dist.reduce_scatter_single(out, inp, op=op)
                return [out]
            both(f"reduce_scatter_single {op}", dtype, reduce_scatter_single, x, reduced=op == R.SUM)

# all_to_all_single with uneven splits: rank r sends r + j + 1 rows to rank j.
for dtype in [torch.float32, torch.int64, torch.bfloat16]:
    send = [rank + j + 1 for j in range(world)]
    recv = [j + rank + 1 for j in range(world)]

    def uneven(dev, t):
        inp = t.repeat(4 * world, 1)[: sum(send)]
        out = torch.empty((sum(recv), 5), dtype=t.dtype, device=dev)
        dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)
        return [out]
    both("all_to_all_single (uneven splits)", dtype, uneven, sample((3, 5), dtype, seed=rank))

# PREMUL_SUM, which gloo lacks: each rank scales its value, then they sum.
for dtype in [torch.float32, torch.bfloat16, torch.float64]:
    x = sample((7,), dtype, seed=rank)
    t = x.to(TPU)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    want = x * 0.5
    dist.all_reduce(want)
    assert_reduced(f"all_reduce PREMUL_SUM {dtype}", t, want, world)
    t = x.to(TPU)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor(0.25, dtype=dtype, device=TPU)))
    want = x * 0.25
    dist.all_reduce(want)
    assert_reduced(f"all_reduce PREMUL_SUM (tensor factor) {dtype}", t, want, world)
    cases += 2

# Coalesced forms through the ProcessGroup (FSDP's and _coalescing_manager's).
# Integer-valued floats: packing changes gloo's summation order, exactly.
pg = dist.group.WORLD


def isample(shape, seed):
    return sample(shape, torch.int64, seed).float()


xs = [isample((4,), seed=rank), isample((2, 3), seed=rank + 7)]
ts = [t.to(TPU) for t in xs]
pg.allreduce_coalesced(ts).wait()
for t, x in zip(ts, xs):
    dist.all_reduce(x)
    assert_same("allreduce_coalesced", t, x)
xs = [isample((4,), seed=rank), isample((2, 3), seed=rank + 7)]
outs = [torch.empty((world * 4,), device=TPU), torch.empty((world * 2, 3), device=TPU)]
pg.all_gather_single_coalesced(outs, [x.to(TPU) for x in xs]).wait()
for o, x in zip(outs, xs):
    want = torch.empty((world * x.shape[0],) + x.shape[1:])
    dist.all_gather_single(want, x)
    assert_same("all_gather_single_coalesced", o, want)
xs = [isample((world * 2,), seed=rank), isample((world * 2, 3), seed=rank + 7)]
outs = [torch.empty((2,), device=TPU), torch.empty((2, 3), device=TPU)]
opts = dist.ReduceScatterOptions()
opts.reduceOp = R.SUM
pg.reduce_scatter_single_coalesced(outs, [x.to(TPU) for x in xs], opts).wait()
for o, x in zip(outs, xs):
    want = torch.empty(o.shape)
    dist.reduce_scatter_single(want, x)
    assert_same("reduce_scatter_single_coalesced", o, want)
x = isample((5,), seed=rank)
outs = [[torch.empty(5, device=TPU)] for _ in range(world)]  # [rank][input]
dist.all_gather_coalesced(outs, [x.to(TPU)])
wants = [[torch.empty(5)] for _ in range(world)]
dist.all_gather_coalesced(wants, [x])
for o, w in zip(outs, wants):
    assert_same("all_gather_coalesced", o[0], w[0])
cases += 4

# A coalescing block with a device (startCoalescing / endCoalescing): the
# all_reduces are captured and issued as one allreduce_coalesced, the
# broadcast runs as issued; one Work covers them.
xs = [isample((4,), seed=rank), isample((3,), seed=rank + 1), isample((2,), seed=rank + 2)]
ts = [x.to(TPU) for x in xs]
with dist._coalescing_manager(device=TPU, async_ops=True) as cm:
    dist.all_reduce(ts[0])
    dist.all_reduce(ts[1])
cm.wait()
with dist._coalescing_manager(device=TPU, async_ops=True) as cm:
    dist.broadcast(ts[2], src=1)
cm.wait()
dist.all_reduce(xs[0])
dist.all_reduce(xs[1])
dist.broadcast(xs[2], src=1)
for t, x in zip(ts, xs):
    assert_same("coalescing block", t, x)
cases += 1

# async_op: wait() and get_future() as NCCL's.
x = sample((1000,), torch.float32, seed=rank)
t = x.to(TPU)
work = dist.all_reduce(t, async_op=True)
fut = work.get_future()
value = fut.wait()
assert isinstance(value, list) and value[0] is not None and value[0].device.type == "tpu", value
work.wait()
assert work.is_completed() and work.exception() is None
want = x.clone()
dist.all_reduce(want)
assert_reduced("async all_reduce", t, want, world)
assert_reduced("async all_reduce future value", value[0], want, world)
chained = dist.all_reduce(x.to(TPU), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
assert_reduced("future.then", chained.wait(), want * 2, world)
cases += 1

# Point to point: a ring of send/recv, isend/irecv and batch_isend_irecv.
nxt, prv = (rank + 1) % world, (rank - 1) % world
for dtype in DTYPES:
    x = sample((6,), dtype, seed=rank)
    got = torch.empty(6, dtype=dtype, device=TPU)
    if rank % 2 == 0:
        dist.send(x.to(TPU), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x.to(TPU), nxt)
    assert_same(f"send/recv {dtype}", got, sample((6,), dtype, seed=prv))
    got = torch.empty(6, dtype=dtype, device=TPU)
    reqs = [dist.isend(x.to(TPU), nxt), dist.irecv(got, prv)]
    for r in reqs:
        r.wait()
    assert_same(f"isend/irecv {dtype}", got, sample((6,), dtype, seed=prv))
    got = torch.empty(6, dtype=dtype, device=TPU)
    ops = [dist.P2POp(dist.isend, x.to(TPU), nxt), dist.P2POp(dist.irecv, got, prv)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    assert_same(f"batch_isend_irecv {dtype}", got, sample((6,), dtype, seed=prv))
    cases += 3

# Object collectives (pickled bytes as uint8 tensors on the group's device).
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank})
assert objs == [{"rank": r} for r in range(world)], objs
lst = [f"from {rank}"]
dist.broadcast_object_list(lst, src=0)
assert lst == ["from 0"], lst
dist.barrier()
cases += 2

report(rank, cases)
dist.destroy_process_group()
