"""tpu_dist's device transport: ranks as threads of this process, each on its
own tpu device (launch_in_process), every collective one XLA program over
the group's devices. References are the collectives' math on the CPU (what
gloo computes), and for DDP / FSDP2 the same model trained on the CPU in one
process on the whole batch. The test session has 2 tpu devices (conftest).
"""
import copy
import datetime
import threading
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import torch_tpu  # noqa: F401
from torch_tpu.distributed import RankError, launch_in_process, transport

N = 2
SHORT = datetime.timedelta(seconds=3)


def data(rank, shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        return torch.randint(-8, 8, shape, generator=g).to(dtype)  # exact in every summation order
    return torch.randint(1, 5, shape, generator=g).to(dtype)


def run(fn, *args, **kw):
    return launch_in_process(fn, N, *args, **kw)


def test_transport_is_device_and_rank_devices():
    def body(rank, world):
        return transport(), torch.tpu.current_device(), dist.get_rank(), dist.get_world_size()

    assert run(body) == [("device", r, r, N) for r in range(N)]


def test_ranks_run_strict_eager_and_the_mode_comes_back():
    # One fused cluster per process: the ranks' interleaved ops would cut it
    # differently every step, so a launch runs its ranks strict.
    def body(rank, world):
        return torch_tpu.get_eager_mode()

    with torch_tpu.eager_mode("fused"):
        assert run(body) == ["strict"] * N
        assert torch_tpu.get_eager_mode() == "fused"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("op", ["SUM", "PRODUCT", "MIN", "MAX", "AVG"])
def test_all_reduce(op, dtype):
    if op == "AVG" and not dtype.is_floating_point:
        pytest.skip("AVG needs a floating dtype (checked in test_bad_input)")
    shape = (3, 5)

    def body(rank, world):
        t = data(rank, shape, dtype).to(f"tpu:{rank}")
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        return t.cpu()

    xs = torch.stack([data(r, shape, dtype) for r in range(N)]).float()
    ref = {"SUM": xs.sum(0), "PRODUCT": xs.prod(0), "MIN": xs.min(0).values, "MAX": xs.max(0).values,
           "AVG": xs.mean(0)}[op].to(dtype)
    for got in run(body):
        torch.testing.assert_close(got, ref)


def test_gather_scatter_family():
    def body(rank, world):
        dev = f"tpu:{rank}"
        x = data(rank, (4, 3), torch.float32).to(dev)
        out = {}
        lst = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(lst, x)
        out["all_gather"] = torch.cat(lst).cpu()
        big = torch.empty(world * 4, 3, device=dev)
        dist.all_gather_into_tensor(big, x)
        out["into_tensor"] = big.cpu()
        rs = torch.empty(2, 3, device=dev)
        dist.reduce_scatter_tensor(rs, x)
        out["reduce_scatter_tensor"] = rs.cpu()
        rl = torch.empty(2, 3, device=dev)
        dist.reduce_scatter(rl, list(x.chunk(world)))
        out["reduce_scatter"] = rl.cpu()
        b = x.clone()
        dist.broadcast(b, src=1)
        out["broadcast"] = b.cpu()
        a2a = torch.empty_like(x)
        dist.all_to_all_single(a2a, x)
        out["all_to_all_single"] = a2a.cpu()
        outs = [torch.empty(2, 3, device=dev) for _ in range(world)]
        dist.all_to_all(outs, list(x.chunk(world)))
        out["all_to_all"] = torch.cat(outs).cpu()
        r = x.clone()
        dist.reduce(r, dst=0)
        out["reduce"] = r.cpu() if rank == 0 else None
        with dist._coalescing_manager(device=torch.device(dev)):
            c1 = torch.empty(world * 4, 3, device=dev)
            dist.all_gather_into_tensor(c1, x)
        out["coalesced"] = c1.cpu()
        dist.barrier()
        return out

    xs = [data(r, (4, 3), torch.float32) for r in range(N)]
    total = sum(xs)
    res = run(body)
    for r, o in enumerate(res):
        torch.testing.assert_close(o["all_gather"], torch.cat(xs))
        torch.testing.assert_close(o["into_tensor"], torch.cat(xs))
        torch.testing.assert_close(o["coalesced"], torch.cat(xs))
        torch.testing.assert_close(o["reduce_scatter_tensor"], total.chunk(N)[r])
        torch.testing.assert_close(o["reduce_scatter"], total.chunk(N)[r])
        torch.testing.assert_close(o["broadcast"], xs[1])
        want = torch.cat([xs[j].chunk(N)[r] for j in range(N)])
        torch.testing.assert_close(o["all_to_all_single"], want)
        torch.testing.assert_close(o["all_to_all"], want)
    torch.testing.assert_close(res[0]["reduce"], total)


def test_uneven_all_to_all_single():
    # rank j sends splits[j][k] rows to rank k.
    splits = [[1, 3], [2, 0]]

    def body(rank, world):
        x = data(rank, (sum(splits[rank]), 2), torch.float32).to(f"tpu:{rank}")
        out_splits = [splits[j][rank] for j in range(world)]
        out = torch.empty(sum(out_splits), 2, device=f"tpu:{rank}")
        dist.all_to_all_single(out, x, out_splits, splits[rank])
        return out.cpu()

    xs = [data(r, (sum(splits[r]), 2), torch.float32) for r in range(N)]
    for k, got in enumerate(run(body)):
        want = torch.cat([xs[j].split(splits[j])[k] for j in range(N)])
        torch.testing.assert_close(got, want)


def test_send_recv_is_a_permute():
    def body(rank, world):
        t = torch.full((3,), float(rank + 1), device=f"tpu:{rank}")
        if rank == 0:
            dist.send(t * 10, dst=1)
            return None
        got = torch.empty(3, device="tpu:1")
        dist.recv(got, src=0)
        return got.cpu()

    torch.testing.assert_close(run(body)[1], torch.full((3,), 10.0))


def test_functional_collectives_and_subgroup():
    import torch.distributed._functional_collectives as funcol

    def body(rank, world):
        x = data(rank, (4,), torch.float32).to(f"tpu:{rank}")
        s = funcol.all_reduce(x, "sum", dist.group.WORLD).cpu()
        g = funcol.all_gather_tensor(x, 0, dist.group.WORLD).cpu()
        sub = dist.new_group([0, 1])
        y = x.clone()
        dist.all_reduce(y, group=sub)
        return s, g, y.cpu(), transport(sub)

    xs = [data(r, (4,), torch.float32) for r in range(N)]
    for s, g, y, tr in run(body):
        torch.testing.assert_close(s, sum(xs))
        torch.testing.assert_close(g, torch.cat(xs))
        torch.testing.assert_close(y, sum(xs))
        assert tr == "device"


def test_bad_input_raises_on_every_rank():
    def mismatch(rank, world):
        t = torch.ones(3 + rank, device=f"tpu:{rank}")  # shapes differ between the ranks
        dist.all_reduce(t)

    with pytest.raises(RankError, match="arguments differ") as e:
        run(mismatch, timeout=SHORT)
    assert sorted(e.value.errors) == [0, 1]
    assert all("arguments differ" in str(x) for x in e.value.errors.values())

    def avg_int(rank, world):
        dist.all_reduce(torch.ones(2, dtype=torch.int32, device=f"tpu:{rank}"), op=dist.ReduceOp.AVG)

    with pytest.raises(RankError, match="AVG needs a floating dtype"):
        run(avg_int, timeout=SHORT)

    def cpu_tensor(rank, world):
        dist.all_reduce(torch.ones(2))

    with pytest.raises(RankError):
        run(cpu_tensor, timeout=SHORT)

    with pytest.raises(ValueError, match="tpu devices"):
        launch_in_process(lambda r, w: None, 64)


def test_dead_and_absent_rank_raise_within_timeout():
    def dies(rank, world):
        if rank == 1:
            raise KeyError("boom")
        dist.all_reduce(torch.ones(2, device=f"tpu:{rank}"))

    t0 = time.monotonic()
    with pytest.raises(RankError, match="boom") as e:
        run(dies, timeout=datetime.timedelta(seconds=30))
    assert "rank 1 failed" in str(e.value.errors[0])
    assert time.monotonic() - t0 < 10  # the failure wakes rank 0, it does not wait out 30 s

    release = threading.Event()

    def absent(rank, world):
        if rank == 1:
            release.wait(20)  # never joins the collective in time
            return
        dist.all_reduce(torch.ones(2, device=f"tpu:{rank}"))

    t0 = time.monotonic()
    try:
        with pytest.raises(RankError, match=r"did not join"):
            run(absent, timeout=datetime.timedelta(seconds=2))
    finally:
        release.set()
    assert time.monotonic() - t0 < 15


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))


def _batches():
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(2 * N, 8, generator=g), torch.randn(2 * N, 4, generator=g)) for _ in range(3)]


def _cpu_reference():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in _batches():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach() for p in model.parameters()]


def _train_on_rank(model, rank, world):
    """SGD on this rank's share of each batch -> the losses, averaged over the ranks."""
    dev = torch.device(f"tpu:{rank}")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in _batches():
        xs, ys = x.chunk(world)[rank].to(dev), y.chunk(world)[rank].to(dev)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        opt.step()
        full = loss.detach().clone()
        dist.all_reduce(full, op=dist.ReduceOp.AVG)
        losses.append(full.item())
    return losses


def _assert_equal_cpu_reference(results):
    """Every rank's (losses, parameters) equal one CPU process's."""
    ref_losses, ref_params = _cpu_reference()
    for losses, params in results:
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-5, atol=1e-6)
        for p, q in zip(params, ref_params):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_ddp_equals_one_cpu_process():
    base = _model()  # built once: the rank threads share torch's CPU generator

    def body(rank, world):
        dev = torch.device(f"tpu:{rank}")
        ddp = nn.parallel.DistributedDataParallel(copy.deepcopy(base).to(dev))
        losses = _train_on_rank(ddp, rank, world)
        return losses, [p.detach().cpu() for p in ddp.module.parameters()]

    _assert_equal_cpu_reference(run(body))


def test_fsdp2_equals_one_cpu_process():
    from torch.distributed.fsdp import fully_shard

    base = _model()  # built once: the rank threads share torch's CPU generator

    def body(rank, world):
        dev = torch.device(f"tpu:{rank}")
        model = copy.deepcopy(base).to(dev)
        for layer in (model[0], model[2]):
            fully_shard(layer)
        fully_shard(model)
        losses = _train_on_rank(model, rank, world)
        return losses, [p.full_tensor().detach().cpu() for p in model.parameters()]

    _assert_equal_cpu_reference(run(body))


def test_tensor_parallel_equals_one_cpu_process():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    base = _model()

    def body(rank, world):
        mesh = init_device_mesh("tpu", (world,))
        model = parallelize_module(copy.deepcopy(base).to(f"tpu:{rank}"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        x = _batches()[0][0].to(f"tpu:{rank}")
        return model(x).cpu()

    want = _model()(_batches()[0][0]).detach()
    for got in run(body):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_compiled_step_with_collectives_on_device_transport():
    """A compiled fn with funcol all_reduce (DDP-like) and all_to_all_single
    (MoE-like dispatch) on the device transport, equal to the CPU math (its
    program form: tests/test_dist_compiled_in_program.py)."""
    import torch.distributed._functional_collectives as funcol

    def body(rank, world):
        @torch.compile(backend="tpu")
        def step(x, w):
            g = funcol.all_reduce((x @ w).tanh(), "avg", dist.group.WORLD)
            routed = funcol.all_to_all_single(g * 3, None, None, dist.group.WORLD)
            return routed + 1

        dev = f"tpu:{rank}"
        return step(data(rank, (4, 3), torch.float32).to(dev) / 8, data(9, (3, 3), torch.float32).to(dev) / 8).cpu()

    w = data(9, (3, 3), torch.float32) / 8
    avg = sum((data(r, (4, 3), torch.float32) / 8 @ w).tanh() for r in range(N)) / N
    for k, got in enumerate(run(body, timeout=datetime.timedelta(seconds=120))):
        # every rank holds the same g: rank k receives g's block k from each rank
        want = torch.cat([(avg * 3).chunk(N)[k]] * N) + 1
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_four_ranks_subgroups_uneven_all_to_all_ring():
    """tests/dist_workers/device_transport_four.py in a process with 4 tpu devices."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_workers", "device_transport_four.py")
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="4")
    r = subprocess.run([sys.executable, "-P", script], cwd="/", env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), (r.stdout[-3000:], r.stderr[-3000:])
