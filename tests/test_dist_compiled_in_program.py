"""Compiled graphs on the device transport hold their collectives: each
graph with `_c10d_functional` collectives is one XLA program of one replica
per rank (torch_tpu/compiler/replicated_graph.py), launched once for every
rank. References: the collectives' math on the CPU, and one CPU process
training the same model on the whole batch (tensor parallel, data parallel,
expert parallel). The test session has 2 tpu devices (conftest)."""
import copy
import datetime

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn

import torch_tpu  # noqa: F401
from torch_tpu.compiler import stats
from torch_tpu.distributed import RankError, launch_in_process

N = 2
TIMEOUT = datetime.timedelta(seconds=120)


def run(fn, *args, **kw):
    kw.setdefault("timeout", TIMEOUT)
    return launch_in_process(fn, N, *args, **kw)


@pytest.fixture
def counted():
    """compile stats, cleared before the test; the test reads them after its launch."""
    stats.reset_compile_stats()
    yield stats.snapshot
    stats.reset_compile_stats()


def assert_one_program_per_graph(s, graphs):
    """Every collective graph was built as one replicated program, none cut into segments."""
    assert s["replicated_graphs"] == graphs, s
    assert s["segmented_graphs"] == 0 and s["collectives"] == 0, s
    assert s["in_program_fallbacks"] == {} and s["eager_graphs"] == {}, s


def rank_data(rank, shape, salt=0):
    g = torch.Generator().manual_seed(100 * salt + rank)
    return torch.randint(-8, 8, shape, generator=g).float() / 8  # exact in every summation order


def test_every_functional_collective_in_one_program(counted):
    def body(rank, world):
        @torch.compile(backend="tpu")
        def step(x):
            w = dist.group.WORLD
            s = funcol.all_reduce(x, "sum", w)
            a = funcol.all_reduce(x * 2, "avg", w)
            m = funcol.all_reduce(x, "max", w)
            g = funcol.all_gather_tensor(x, 0, w)
            r = funcol.reduce_scatter_tensor(g * 3, "sum", 0, w)
            t = funcol.all_to_all_single(x + 1, None, None, w)
            b = funcol.broadcast(x - 1, 1, w)
            return s, a, m, g, r, t, b

        return [t.cpu() for t in step(rank_data(rank, (4, 3)).to(f"tpu:{rank}"))]

    got = run(body)
    xs = [rank_data(r, (4, 3)) for r in range(N)]
    gathered = torch.cat(xs)
    for rank, (s, a, m, g, r, t, b) in enumerate(got):
        torch.testing.assert_close(s, sum(xs))
        torch.testing.assert_close(a, sum(x * 2 for x in xs) / N)
        torch.testing.assert_close(m, torch.stack(xs).max(0).values)
        torch.testing.assert_close(g, gathered)
        torch.testing.assert_close(r, (gathered * 3 * N).chunk(N)[rank])
        torch.testing.assert_close(t, torch.cat([(x + 1).chunk(N)[rank] for x in xs]))
        torch.testing.assert_close(b, xs[1] - 1)
    s = counted()
    assert_one_program_per_graph(s, graphs=N)
    assert s["collectives_in_program"] == 7 * N, s


def test_coalesced_collectives_in_one_program(counted):
    def body(rank, world):
        @torch.compile(backend="tpu")
        def step(a, b):
            w = dist.group.WORLD
            ra, rb = funcol.all_reduce_coalesced([a, b * 2], "sum", w)
            ga, gb = funcol.all_gather_into_tensor_coalesced([a, b], w)
            sa, sb = funcol.reduce_scatter_tensor_coalesced([ga, gb * 3], "avg", [0, 0], w)
            return ra, rb, ga, gb, sa, sb

        a, b = rank_data(rank, (4, 3)), rank_data(rank, (2,), salt=1)
        return [t.cpu() for t in step(a.to(f"tpu:{rank}"), b.to(f"tpu:{rank}"))]

    As = [rank_data(r, (4, 3)) for r in range(N)]
    Bs = [rank_data(r, (2,), salt=1) for r in range(N)]
    ga, gb = torch.cat(As), torch.cat(Bs)
    for rank, (ra, rb, got_ga, got_gb, sa, sb) in enumerate(run(body)):
        torch.testing.assert_close(ra, sum(As))
        torch.testing.assert_close(rb, sum(b * 2 for b in Bs))
        torch.testing.assert_close(got_ga, ga)
        torch.testing.assert_close(got_gb, gb)
        torch.testing.assert_close(sa, ga.chunk(N)[rank])  # every rank holds the same gathered value: its average
        torch.testing.assert_close(sb, (gb * 3).chunk(N)[rank])
    s = counted()
    assert_one_program_per_graph(s, graphs=N)
    assert s["collectives_in_program"] == 3 * N, s


def test_compiled_tensor_parallel_is_one_program_per_graph(counted):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    x = torch.randn(6, 8, requires_grad=True)

    def body(rank, world):
        mesh = init_device_mesh("tpu", (world,))
        model = parallelize_module(copy.deepcopy(base).to(f"tpu:{rank}"), mesh,
                                   {"0": ColwiseParallel(), "2": RowwiseParallel()})
        xr = x.detach().to(f"tpu:{rank}").requires_grad_()
        out = torch.compile(model, backend="tpu")(xr)
        (out * out).sum().backward()
        grads = [p.grad.full_tensor().cpu() for p in model.parameters()]
        return out.detach().cpu(), xr.grad.cpu(), grads

    ref = copy.deepcopy(base)
    out = ref(x)
    (out * out).sum().backward()
    for got_out, got_xgrad, grads in run(body):
        torch.testing.assert_close(got_out, out.detach(), rtol=1e-5, atol=1e-5)
        # the input's gradient is an all_reduce of the column shards' parts, in the backward's program
        torch.testing.assert_close(got_xgrad, x.grad, rtol=1e-5, atol=1e-5)
        for g, p in zip(grads, ref.parameters()):
            torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-5)
    # forward (RowwiseParallel's all_reduce) and backward (ColwiseParallel's input-gradient all_reduce)
    assert_one_program_per_graph(counted(), graphs=2 * N)


def test_compiled_data_parallel_training_equals_one_cpu_process(counted):
    """The DDP step compiled: each rank's gradients averaged by all_reduce
    inside the same program as the SGD update, 3 steps, equal to one CPU
    process training on the whole batch."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 1))
    batches = [(torch.randn(2 * N, 5), torch.randn(2 * N, 1)) for _ in range(3)]

    @torch.compile(backend="tpu")
    def sync_and_step(params, grads, lr):
        for p, g in zip(params, grads):
            p.sub_(funcol.all_reduce(g, "avg", dist.group.WORLD) * lr)

    def body(rank, world):
        model = copy.deepcopy(base).to(f"tpu:{rank}")
        for xb, yb in batches:
            xs, ys = xb.chunk(world)[rank].to(f"tpu:{rank}"), yb.chunk(world)[rank].to(f"tpu:{rank}")
            model.zero_grad()
            nn.functional.mse_loss(model(xs), ys).backward()
            with torch.no_grad():
                params = list(model.parameters())
                sync_and_step(params, [p.grad for p in params], 0.1)
        return [p.detach().cpu() for p in model.parameters()]

    ref = copy.deepcopy(base)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for xb, yb in batches:
        opt.zero_grad()
        nn.functional.mse_loss(ref(xb), yb).backward()
        opt.step()
    for params in run(body):
        for got, want in zip(params, ref.parameters()):
            torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
    s = counted()
    assert s["replicated_graphs"] >= N and s["segmented_graphs"] == 0 and s["in_program_fallbacks"] == {}, s


class ExpertParallelMoE(nn.Module):
    """Top-1 routing with a fixed capacity per expert, experts sharded over
    the ranks: tokens go to their expert's rank by all_to_all_single and
    come back the same way (equal splits: capacity x experts per rank).
    `w1`/`w2` hold this rank's experts (all of them with `world` = 1, the
    same math in one process)."""

    def __init__(self, dim, experts, capacity):
        super().__init__()
        self.router = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, dim, 2 * dim) / dim ** 0.5)
        self.w2 = nn.Parameter(torch.randn(experts, 2 * dim, dim) / dim ** 0.5)
        self.experts, self.capacity, self.world = experts, capacity, 1

    def shard(self, rank, world):
        """This module on `rank` of `world`: only its experts' weights."""
        local = self.experts // world
        m = copy.deepcopy(self)
        m.w1 = nn.Parameter(self.w1.detach()[rank * local:(rank + 1) * local].clone())
        m.w2 = nn.Parameter(self.w2.detach()[rank * local:(rank + 1) * local].clone())
        m.world = world
        return m

    def forward(self, x):
        e, c, world = self.experts, self.capacity, self.world
        probs = self.router(x).softmax(-1)
        gate, choice = probs.max(-1)
        onehot = nn.functional.one_hot(choice, e).float()                   # [T, E]
        slot = (onehot.cumsum(0) - 1) * onehot                             # place within its expert
        keep = onehot * (slot < c).float()                                 # tokens past capacity drop
        dispatch = keep.unsqueeze(-1) * nn.functional.one_hot(slot.long().clamp(0, c - 1), c).float()  # [T, E, C]
        buckets = torch.einsum("tec,td->ecd", dispatch, x)                 # [E, C, D]
        local = e // world
        if world > 1:
            buckets = funcol.all_to_all_single(buckets.reshape(e * c, -1), None, None, dist.group.WORLD)
            # this rank now holds its experts' slots from every rank: [world, local, C, D]
            buckets = buckets.reshape(world, local, c, -1).transpose(0, 1).reshape(local, world * c, -1)
        y = torch.bmm(torch.relu(torch.bmm(buckets, self.w1)), self.w2)
        if world > 1:
            y = y.reshape(local, world, c, -1).transpose(0, 1).reshape(e * c, -1)
            y = funcol.all_to_all_single(y, None, None, dist.group.WORLD).reshape(e, c, -1)
        return torch.einsum("tec,ecd->td", dispatch, y) * gate.unsqueeze(-1)


def test_compiled_expert_parallel_moe_is_one_program_per_graph(counted):
    torch.manual_seed(0)
    dim, experts, capacity, tokens = 8, 4, 3, 6
    base = ExpertParallelMoE(dim, experts, capacity)
    xs = [torch.randn(tokens, dim) for _ in range(N)]

    def body(rank, world):
        model = base.shard(rank, world).to(f"tpu:{rank}")
        out = torch.compile(model, backend="tpu")(xs[rank].to(f"tpu:{rank}"))
        out.square().sum().backward()
        return out.detach().cpu(), model.router.weight.grad.cpu(), model.w1.grad.cpu(), model.w2.grad.cpu()

    # One CPU process: each rank's tokens through all the experts, routed
    # as that rank routes them (the capacity applies per rank's tokens).
    ref = copy.deepcopy(base)
    outs = [ref(x) for x in xs]
    sum(o.square().sum() for o in outs).backward()
    local = experts // N
    for rank, (out, router_grad, w1_grad, w2_grad) in enumerate(run(body)):
        torch.testing.assert_close(out, outs[rank].detach(), rtol=1e-5, atol=1e-5)
        # an expert's gradient gathers every rank's tokens routed to it
        torch.testing.assert_close(w1_grad, ref.w1.grad[rank * local:(rank + 1) * local], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(w2_grad, ref.w2.grad[rank * local:(rank + 1) * local], rtol=1e-4, atol=1e-5)
        # the router's gradient comes from this rank's own tokens only
        own = copy.deepcopy(base)
        own(xs[rank]).square().sum().backward()
        torch.testing.assert_close(router_grad, own.router.weight.grad, rtol=1e-4, atol=1e-5)
    # the forward holds dispatch and combine; the backward the combine's
    # transpose (the dispatched tokens need no gradient: x does not)
    s = counted()
    assert_one_program_per_graph(s, graphs=2 * N)
    assert s["collectives_in_program"] == 3 * N, s


def test_rank_dependent_graphs_run_in_segments_and_stay_right(counted):
    """A constant that differs by rank (a slice at the rank's offset) makes
    the ranks' modules differ: no one program, so every rank runs segments."""
    def body(rank, world):
        @torch.compile(backend="tpu", dynamic=False)
        def step(x):
            return funcol.all_reduce(x[rank:rank + 2] * 2, "sum", dist.group.WORLD)

        return step(torch.arange(12.).reshape(4, 3).to(f"tpu:{rank}")).cpu()

    x = torch.arange(12.).reshape(4, 3)
    for got in run(body):
        torch.testing.assert_close(got, x[0:2] * 2 + x[1:3] * 2)
    s = counted()
    assert s["segmented_graphs"] == N and s["replicated_graphs"] == N, s
    assert all("differ" in r for r in s["in_program_fallbacks"].values()), s


def test_ranks_issuing_different_programs_raise_on_every_rank(counted):
    """Different programs at the rendezvous: every rank runs its graph in
    segments, whose all_reduces of different shapes then raise on every rank."""
    def body(rank, world):
        @torch.compile(backend="tpu", dynamic=False)
        def step(x):
            return funcol.all_reduce(x * 2, "sum", dist.group.WORLD)

        rows = 4 if rank == 0 else 6  # rank 1 brings another program
        return step(torch.ones(rows, 3, device=f"tpu:{rank}")).cpu()

    with pytest.raises(RankError, match="differ") as info:
        run(body, timeout=datetime.timedelta(seconds=30))
    assert set(info.value.errors) == {0, 1}
    assert all("different programs" in r for r in counted()["in_program_fallbacks"].values())


def test_uneven_all_to_all_runs_in_segments_and_stays_right(counted):
    """Split sizes that differ between ranks have no one-text program: the
    graph runs in segments (the device transport pads the blocks)."""
    def body(rank, world):
        @torch.compile(backend="tpu", dynamic=False)
        def step(x, splits_in, splits_out):
            return funcol.all_to_all_single(x * 2, splits_out, splits_in, dist.group.WORLD) + 1

        splits_in = [1, 3] if rank == 0 else [2, 2]
        splits_out = [1, 2] if rank == 0 else [3, 2]
        x = torch.arange(4 * 2, dtype=torch.float32).reshape(4, 2) + 10 * rank
        return step(x.to(f"tpu:{rank}"), splits_in, splits_out).cpu()

    got = run(body)
    x0, x1 = (torch.arange(8.).reshape(4, 2) + 10 * r for r in range(N))
    torch.testing.assert_close(got[0], torch.cat([x0[:1], x1[:2]]) * 2 + 1)
    torch.testing.assert_close(got[1], torch.cat([x0[1:], x1[2:]]) * 2 + 1)
    s = counted()
    assert s["segmented_graphs"] == N and s["replicated_graphs"] == 0, s
    assert all("uneven" in r for r in s["in_program_fallbacks"].values()), s
