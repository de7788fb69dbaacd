"""torch_tpu.distributed.spmd_*: collectives over 4 in-process tpu devices as
one XLA program of 4 replicas, compared with gloo.

The references come from real gloo collectives: four c10d ProcessGroupGloo
objects on one HashStore, one per thread, world size 4 (all_reduce,
all_gather, all_to_all, and send/recv for permute). reduce_scatter's
reference is gloo's all_reduce followed by the rank's block (the definition
of reduce_scatter). bf16 values are small integers, so every order of
summation gives the same exact result on both sides.

The test session runs 2 devices (conftest); the checks then rerun this file
in a subprocess with TORCH_TPU_NUM_DEVICES=4 (cwd="/", so the installed
package is imported, not the source tree).
"""

import datetime
import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.distributed as dist

import torch_tpu
from torch_tpu import settings
from torch_tpu.distributed import (
    spmd_all_gather,
    spmd_all_reduce,
    spmd_all_to_all,
    spmd_permute,
    spmd_program_text,
    spmd_reduce_scatter,
)

N = 4
FOUR = settings.get("TORCH_TPU_NUM_DEVICES") == 4
on_four = pytest.mark.skipif(not FOUR, reason="runs in the 4-device subprocess (test_on_four_devices)")


def test_on_four_devices():
    if FOUR:
        pytest.skip("already in the 4-device run")
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="4")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", os.path.abspath(__file__), "-q", "-x", "-p", "no:cacheprovider", "-n", "0"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    summary = [line for line in r.stdout.splitlines() if " passed" in line]
    assert summary and int(summary[-1].split(" passed")[0].split()[-1]) >= 60, r.stdout[-2000:]


# ---- gloo references: 4 ranks in 4 threads -------------------------------------


def gloo(fn):
    """Runs fn(pg, rank) on 4 gloo ranks (one thread each); returns the
    per-rank results."""
    store = dist.HashStore()
    out = [None] * N
    errors = []

    def work(rank):
        try:
            pg = dist.ProcessGroupGloo(store, rank, N, datetime.timedelta(seconds=30))
            out[rank] = fn(pg, rank)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(r,)) for r in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return out


GLOO_OP = {
    "sum": dist.ReduceOp.SUM,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
}


def gloo_all_reduce(inputs, op):
    def f(pg, r):
        t = inputs[r].clone()
        pg.allreduce([t], _ar_opts(op)).wait()
        return t

    return gloo(f)


def _ar_opts(op):
    o = dist.AllreduceOptions()
    o.reduceOp = GLOO_OP[op]
    return o


def gloo_all_gather(inputs, dim):
    def f(pg, r):
        outs = [torch.empty_like(inputs[r]) for _ in range(N)]
        pg.allgather([outs], [inputs[r].clone()]).wait()
        return torch.cat(outs, dim)

    return gloo(f)


def gloo_all_to_all(inputs, split_dim, concat_dim):
    def f(pg, r):
        sends = [c.contiguous() for c in inputs[r].chunk(N, split_dim)]
        recvs = [torch.empty_like(s) for s in sends]
        pg.alltoall(recvs, sends).wait()
        return torch.cat(recvs, concat_dim)

    return gloo(f)


def gloo_permute(inputs, pairs):
    def f(pg, r):
        works = []
        out = torch.zeros_like(inputs[r])
        for s, t in pairs:
            if s == r:
                works.append(pg.send([inputs[r].clone()], t, 0))
            if t == r:
                works.append(pg.recv([out], s, 0))
        for w in works:
            w.wait()
        return out

    return gloo(f)


# ---- inputs -----------------------------------------------------------------------

DTYPES = [torch.float32, torch.int32, torch.bfloat16]


def make_inputs(shape, dtype, op="sum", seed=0):
    g = torch.Generator().manual_seed(seed)
    if op == "product":
        xs = [torch.randint(-2, 3, shape, generator=g) for _ in range(N)]
    else:
        xs = [torch.randint(-20, 21, shape, generator=g) for _ in range(N)]
    if dtype == torch.float32:
        xs = [x.float() + torch.rand(shape, generator=g) for x in xs]
    return [x.to(dtype) for x in xs]


def to_devices(xs):
    return [x.to(f"tpu:{i}") for i, x in enumerate(xs)]


def assert_results(got, want):
    assert len(got) == N
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.device == torch.device(f"tpu:{i}")
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        g = g.cpu()
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        else:
            assert torch.equal(g, w), (i, g, w)


# ---- the program is one XLA collective of N replicas -------------------------------


@on_four
@pytest.mark.parametrize(
    "kind,op,needle",
    [
        ("all_reduce", "sum", "stablehlo.all_reduce"),
        ("all_gather", "sum", "stablehlo.all_gather"),
        ("reduce_scatter", "max", "stablehlo.reduce_scatter"),
        ("all_to_all", "sum", "stablehlo.all_to_all"),
        ("permute", "sum", "stablehlo.collective_permute"),
    ],
)
def test_program_text(kind, op, needle):
    text = spmd_program_text(kind, N, (8, 3), torch.float32, op=op, pairs=[(0, 1), (1, 0)])
    assert needle in text
    assert "mhlo.num_replicas = 4" in text
    assert "replica_groups = dense<[[0, 1, 2, 3]]>" in text or needle == "stablehlo.collective_permute"
    if kind in ("all_reduce", "reduce_scatter"):
        assert {"sum": "stablehlo.add", "max": "stablehlo.maximum"}[op] in text


# ---- results against gloo ------------------------------------------------------------


@on_four
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "product", "min", "max"])
def test_all_reduce(dtype, op):
    xs = make_inputs((5, 3), dtype, op)
    got = spmd_all_reduce(to_devices(xs), op=getattr(dist.ReduceOp, op.upper()))
    if dtype == torch.bfloat16:
        # gloo's bf16 support varies; small integers make the reduction exact
        # in f32, which is the reference here.
        want = [w.to(dtype) for w in gloo_all_reduce([x.float() for x in xs], op)]
    else:
        want = gloo_all_reduce(xs, op)
    assert_results(got, want)


@on_four
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_all_reduce_avg(dtype):
    xs = make_inputs((4, 2), dtype)
    got = spmd_all_reduce(to_devices(xs), op=dist.ReduceOp.AVG)
    want = [(w / N).to(dtype) for w in gloo_all_reduce([x.float() for x in xs], "sum")]
    assert_results(got, want)


@on_four
def test_all_reduce_avg_integer_raises():
    with pytest.raises(TypeError, match="avg needs a floating dtype"):
        spmd_all_reduce(to_devices(make_inputs((3,), torch.int32)), op="avg")


@on_four
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_all_gather(dtype, dim):
    xs = make_inputs((2, 3), dtype)
    got = spmd_all_gather(to_devices(xs), dim=dim)
    want = gloo_all_gather([x.float() for x in xs] if dtype == torch.bfloat16 else xs, dim)
    assert_results(got, [w.to(dtype) for w in want])


@on_four
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op,dim", [("sum", 0), ("max", 1), ("min", 0), ("product", 1), ("avg", 0)])
def test_reduce_scatter(dtype, op, dim):
    if op == "avg" and dtype == torch.int32:
        pytest.skip("avg is for floating dtypes (tested to raise above)")
    xs = make_inputs((8, 4), dtype, op)
    got = spmd_reduce_scatter(to_devices(xs), op=op, dim=dim)
    reduced = gloo_all_reduce([x.float() if dtype == torch.bfloat16 else x for x in xs], "sum" if op == "avg" else op)
    want = []
    for r in range(N):
        block = reduced[r].chunk(N, dim)[r]
        want.append((block / N if op == "avg" else block).to(dtype))
    assert_results(got, want)


@on_four
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("split_dim,concat_dim", [(0, 0), (0, 1), (1, 0)])
def test_all_to_all(dtype, split_dim, concat_dim):
    xs = make_inputs((4, 8), dtype)
    got = spmd_all_to_all(to_devices(xs), split_dim=split_dim, concat_dim=concat_dim)
    want = gloo_all_to_all([x.float() for x in xs] if dtype == torch.bfloat16 else xs, split_dim, concat_dim)
    assert_results(got, [w.to(dtype) for w in want])


@on_four
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pairs", [[(0, 1), (1, 2), (2, 3), (3, 0)], [(0, 2), (3, 1)]], ids=["ring", "partial"])
def test_permute(dtype, pairs):
    xs = make_inputs((3, 2), dtype)
    got = spmd_permute(to_devices(xs), pairs)
    want = gloo_permute([x.float() for x in xs] if dtype == torch.bfloat16 else xs, pairs)
    assert_results(got, [w.to(dtype) for w in want])


@on_four
def test_non_contiguous_inputs():
    xs = [torch.arange(12.0).reshape(3, 4) * (i + 1) for i in range(N)]
    views = [x.to(f"tpu:{i}").t() for i, x in enumerate(xs)]
    got = spmd_all_reduce(views, "sum")
    want = gloo_all_reduce([x.t().contiguous() for x in xs], "sum")
    assert_results(got, want)


# ---- bad input --------------------------------------------------------------------------


@on_four
def test_wrong_device_raises():
    xs = to_devices(make_inputs((3,), torch.float32))
    xs[1], xs[2] = xs[2], xs[1]
    with pytest.raises(ValueError, match="tensor 1 is on tpu:2; tensor i must be on tpu:i"):
        spmd_all_reduce(xs)
    with pytest.raises(ValueError, match="tensor 0 is on cpu"):
        spmd_all_gather(make_inputs((3,), torch.float32))


@on_four
def test_mismatched_shape_or_dtype_raises():
    xs = to_devices(make_inputs((3,), torch.float32))
    xs[3] = torch.zeros(4, device="tpu:3")
    with pytest.raises(ValueError, match="same shape and dtype"):
        spmd_all_reduce(xs)
    xs[3] = torch.zeros(3, dtype=torch.int32, device="tpu:3")
    with pytest.raises(ValueError, match="same shape and dtype"):
        spmd_all_gather(xs)


@on_four
def test_wrong_count_and_arguments_raise():
    xs = to_devices(make_inputs((8,), torch.float32))
    with pytest.raises(ValueError, match="got none"):
        spmd_all_reduce([])
    with pytest.raises(ValueError, match="only 4 tpu devices"):
        spmd_all_reduce(xs + [xs[0]])
    with pytest.raises(TypeError, match="one tpu tensor per device"):
        spmd_all_reduce(xs[0])
    with pytest.raises(ValueError, match="does not divide"):
        spmd_reduce_scatter(xs[:3], dim=0)
    with pytest.raises(ValueError, match="out of range"):
        spmd_all_gather(xs, dim=1)
    with pytest.raises(ValueError, match="unsupported reduce op"):
        spmd_all_reduce(xs, op="bitwise_xor")
    with pytest.raises(ValueError, match="out of range or repeats"):
        spmd_permute(xs, [(0, 1), (2, 1)])


@on_four
def test_inputs_from_fused_eager_and_results_feed_ops():
    # In fused eager mode the inputs are values of recorded, not yet run
    # clusters; the collective must see them, and its results are ordinary
    # tpu tensors for later ops.
    xs = make_inputs((4, 3), torch.float32)
    with torch_tpu.eager_mode("fused"):
        ys = [(x * 2 + 1) for x in to_devices(xs)]
        got = spmd_all_reduce(ys, "max")
        got = [g - 1 for g in got]
    want = [w - 1 for w in gloo_all_reduce([x * 2 + 1 for x in xs], "max")]
    assert_results(got, want)


@on_four
def test_programs_live_in_the_one_program_cache():
    # An spmd collective is compiled once per program text and device list, by
    # the program runner, and counted under cache_info()["modes"]["collective"].
    xs = make_inputs((7, 3), torch.float32)
    before = torch_tpu.cache_info()["modes"]["collective"]
    spmd_all_reduce(to_devices(xs), op=dist.ReduceOp.SUM)
    mid = torch_tpu.cache_info()["modes"]["collective"]
    got = spmd_all_reduce(to_devices(xs), op=dist.ReduceOp.SUM)
    after = torch_tpu.cache_info()["modes"]["collective"]
    assert mid["misses"] == before["misses"] + 1 and mid["entries"] == before["entries"] + 1
    assert after["hits"] == mid["hits"] + 1 and after["misses"] == mid["misses"]
    assert_results(got, gloo_all_reduce(xs, "sum"))
    torch_tpu.cache_clear()
    assert torch_tpu.cache_info()["modes"]["collective"]["entries"] == 0
