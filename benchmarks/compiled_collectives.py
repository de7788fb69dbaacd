"""Compiled steps on in-process ranks (the device transport): collectives
inside one program per graph against program segments, in one run.

    python -P benchmarks/compiled_collectives.py            # 2 ranks
    python -P benchmarks/compiled_collectives.py --ranks 4 --steps 10

Each workload is a compiled forward + backward on every rank (ranks as
threads of one process, rank r on tpu:r):
- tp_mlp: a 2-layer MLP, ColwiseParallel + RowwiseParallel (DTensor), width
  --width, batch 32: one all_reduce forward, one backward;
- ep_dispatch: expert-parallel dispatch and combine (all_to_all_single with
  equal splits around a batched expert matmul), the shape of an MoE layer;
- dp_update: a data-parallel update (gradients averaged by all_reduce and
  the SGD step in one compiled function) after an eager backward.

Each runs twice, in fresh processes: TORCH_TPU_COLLECTIVES_IN_PROGRAM=1 (one
program of one replica per rank per graph, the default) and =0 (segments,
each collective its own program between them). A row is the slowest rank's
median step after --warmup steps; `programs/step` counts the programs run
per step by all ranks together, of every kind (torch_tpu.cache_info()'s hits
and misses: compiled graphs, collectives, eager ops). Prints ms per form and the ratio in-program /
segments; writes benchmarks/results/compiled_collectives_<stamp>.json.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import machine, save_results  # noqa: E402

WORKLOADS = ("tp_mlp", "ep_dispatch", "dp_update")
PREFIX = "COMPILED_COLLECTIVES_JSON "


def _program_runs():
    """Programs run so far in this process (every rank, every mode: cache hits and misses)."""
    import torch_tpu
    info = torch_tpu.cache_info()
    return info["hits"] + info["misses"]


def _workload(name, rank, world, width):
    """(step function, its arguments) for one rank."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    import torch.nn as nn

    dev = f"tpu:{rank}"
    torch.manual_seed(0)
    if name == "tp_mlp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        model = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        model = parallelize_module(model.to(dev), init_device_mesh("tpu", (world,)),
                                   {"0": ColwiseParallel(), "2": RowwiseParallel()})
        compiled = torch.compile(model, backend="tpu")
        x = torch.randn(32, width, device=dev, requires_grad=True)

        def step():
            compiled(x).square().mean().backward()
        return step
    if name == "ep_dispatch":
        experts, capacity = 4 * world, 16
        w = nn.Parameter(torch.randn(experts // world, width, width, device=dev) / width ** 0.5)

        @torch.compile(backend="tpu")
        def layer(tokens):
            routed = funcol.all_to_all_single(tokens.reshape(experts * capacity, width), None, None,
                                              dist.group.WORLD)
            local = routed.reshape(world, experts // world, capacity, width).transpose(0, 1)
            y = torch.bmm(local.reshape(experts // world, world * capacity, width), w).relu()
            y = y.reshape(experts // world, world, capacity, width).transpose(0, 1)
            return funcol.all_to_all_single(y.reshape(experts * capacity, width), None, None, dist.group.WORLD)

        tokens = torch.randn(experts, capacity, width, device=dev, requires_grad=True)

        def step():
            layer(tokens).square().mean().backward()
        return step
    if name == "dp_update":
        model = nn.Sequential(nn.Linear(width, 4 * width), nn.Tanh(), nn.Linear(4 * width, 1)).to(dev)
        params = list(model.parameters())
        x, y = torch.randn(32, width, device=dev), torch.randn(32, 1, device=dev)

        @torch.compile(backend="tpu")
        def sync_and_step(ps, gs):
            for p, g in zip(ps, gs):
                p.sub_(funcol.all_reduce(g, "avg", dist.group.WORLD) * 0.01)

        def step():
            model.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            with torch.no_grad():
                sync_and_step(params, [p.grad for p in params])
        return step
    raise ValueError(name)


def worker(args):
    """One form of one workload, in this process: prints a JSON line."""
    import time

    import torch
    import torch.distributed as dist
    from torch_tpu.compiler import stats
    from torch_tpu.distributed import launch_in_process

    def body(rank, world):
        step = _workload(args.workload, rank, world, args.width)
        for _ in range(args.warmup):
            step()
        torch.tpu.synchronize()
        dist.barrier()
        times, runs0 = [], _program_runs()
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            torch.tpu.synchronize()
            times.append(time.perf_counter() - t0)
        dist.barrier()
        return statistics.median(times), (_program_runs() - runs0) / args.steps

    res = launch_in_process(body, args.ranks, timeout=datetime.timedelta(seconds=600))
    s = stats.snapshot()
    print(PREFIX + json.dumps({"step_s": max(r[0] for r in res), "programs_per_step": res[0][1],
                               "replicated_graphs": s["replicated_graphs"], "segmented_graphs": s["segmented_graphs"]}),
          flush=True)


def run_form(args, workload, in_program):
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES=str(args.ranks), TORCH_TPU_COLLECTIVES_IN_PROGRAM=str(int(in_program)))
    cmd = [sys.executable, "-P", os.path.abspath(__file__), "--worker", "--workload", workload, "--ranks",
           str(args.ranks), "--steps", str(args.steps), "--warmup", str(args.warmup), "--width", str(args.width)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd="/")
    for line in r.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    raise RuntimeError(f"{workload} (in_program={in_program}) failed:\n{r.stderr[-3000:]}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    print(f"{'workload':12s} {'in-program ms':>14s} {'segments ms':>12s} {'ratio':>6s} "
          f"{'programs/step (in / seg)':>25s}")
    for w in [w for w in args.workloads.split(",") if w]:
        one = run_form(args, w, True)
        seg = run_form(args, w, False)
        assert one["segmented_graphs"] == 0 and seg["replicated_graphs"] == 0, (one, seg)
        ratio = one["step_s"] / seg["step_s"]
        rows.append({"workload": w, "in_program": one, "segments": seg, "ratio": ratio})
        print(f"{w:12s} {one['step_s'] * 1e3:14.2f} {seg['step_s'] * 1e3:12.2f} {ratio:6.2f} "
              f"{one['programs_per_step']:11.1f} / {seg['programs_per_step']:<11.1f}", flush=True)
    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(), "args": vars(args), "rows": rows}
    path = save_results(doc, os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                        "compiled_collectives", started)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
