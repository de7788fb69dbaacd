"""tpu_dist's two transports against plain gloo, in one run.

    python benchmarks/transports.py                  # 2 ranks, 4 KiB to 64 MiB
    python benchmarks/transports.py --ranks 4
    python benchmarks/transports.py --quick          # up to 1 MiB, few iterations

- device: N ranks as threads of one process (torch_tpu.distributed.
  launch_in_process, TORCH_TPU_NUM_DEVICES=N), tpu tensors, each collective
  one XLA program over the N devices.
- host: N processes (torchrun), tpu tensors, tpu_dist over gloo with host
  copies.
- gloo: the same N processes, CPU tensors, gloo.

Collectives: all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
all_to_all_single (float32; sizes are the full buffer, as NCCL-tests). Each
rank times each call after warmup (tpu: until torch.tpu.synchronize()
returns); a row is the slowest rank's median. Prints ms per transport and
the ratios device/host and device/gloo; writes benchmarks/results/
transports_<stamp>.json.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collectives import QUICK_SIZES, SIZES, fmt_size, iterations  # noqa: E402
from machine_info import machine, save_results  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
PREFIX = "TRANSPORTS_JSON "


def make_call(op, size, device, n):
    import torch
    import torch.distributed as dist

    numel = size // 4
    full = torch.full((numel,), 1.0 / n, device=device)
    part = torch.full((numel // n,), 1.0 / n, device=device)
    out = torch.empty_like(full)

    def done(t):
        # One element read back: the call's result exists on this rank, not
        # just its launch (a tpu copy_ may still be pending or in flight).
        return float(t[0])

    if op == "all_reduce":
        return lambda: (dist.all_reduce(full), done(full))
    if op == "all_gather":
        return lambda: (dist.all_gather_into_tensor(full, part), done(full))
    if op == "reduce_scatter":
        return lambda: (dist.reduce_scatter_tensor(part, full), done(part))
    return lambda: (dist.all_to_all_single(out, full), done(out))


def time_ops(sizes, scale, transports):
    """Rows of this rank: {op, size, transport, times}; `transports` maps a
    name to its device ("tpu" or "cpu"), timed alternately call by call."""
    import torch.distributed as dist

    n = dist.get_world_size()
    rows = []
    for op in OPS:
        for size in sizes:
            warm, count = iterations(size, scale)
            calls = {t: make_call(op, size, d, n) for t, d in transports.items()}
            times = {t: [] for t in transports}
            for i in range(warm + count):
                for t in (list(transports) if i % 2 == 0 else list(transports)[::-1]):
                    dist.barrier()
                    t0 = time.perf_counter()
                    calls[t]()
                    if i >= warm:
                        times[t].append(time.perf_counter() - t0)
            for t in transports:
                rows.append({"op": op, "size": size, "transport": t, "median_s": statistics.median(times[t])})
    return rows


def slowest(per_rank):
    """The slowest rank's median for each (op, size, transport)."""
    out = {}
    for rows in per_rank:
        for r in rows:
            k = (r["op"], r["size"], r["transport"])
            out[k] = max(out.get(k, 0.0), r["median_s"])
    return out


def process_worker(args):
    import torch.distributed as dist
    import torch_tpu  # noqa: F401

    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    rows = time_ops([int(s) for s in args.sizes.split(",")], args.iter_scale, {"host": "tpu", "gloo": "cpu"})
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, rows)
    if dist.get_rank() == 0:
        print(PREFIX + json.dumps([[list(k), v] for k, v in slowest(every).items()]), flush=True)
    dist.destroy_process_group()


def in_process_worker(args):
    import torch_tpu  # noqa: F401
    from torch_tpu.distributed import launch_in_process

    sizes = [int(s) for s in args.sizes.split(",")]
    every = launch_in_process(lambda rank, n: time_ops(sizes, args.iter_scale, {"device": "tpu"}), args.ranks,
                              timeout=datetime.timedelta(seconds=300))
    print(PREFIX + json.dumps([[list(k), v] for k, v in slowest(every).items()]), flush=True)


def run(cmd, env, timeout):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env,
                       cwd=HERE)
    for line in p.stdout.splitlines():
        if line.startswith(PREFIX):
            return {tuple(k): v for k, v in json.loads(line[len(PREFIX):])}
    raise SystemExit(f"{' '.join(cmd[:4])} ... exited {p.returncode} without a result:\n{p.stdout[-3000:]}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--iter-scale", type=float, default=1.0)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--worker", choices=("process", "in_process"), help=argparse.SUPPRESS)
    p.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker == "process":
        return process_worker(args)
    if args.worker == "in_process":
        return in_process_worker(args)

    sizes = QUICK_SIZES if args.quick else SIZES
    if args.quick:
        args.iter_scale = min(args.iter_scale, 0.2)
    common = ["--sizes", ",".join(map(str, sizes)), "--iter-scale", str(args.iter_scale)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("OMP_NUM_THREADS", "1")
    started = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()[0]
    me = os.path.abspath(__file__)
    procs = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.ranks),
                 "--max-restarts", "0", me, "--worker", "process"] + common, env, args.timeout)
    inproc = run([sys.executable, me, "--worker", "in_process", "--ranks", str(args.ranks)] + common,
                 dict(env, TORCH_TPU_NUM_DEVICES=str(args.ranks)), args.timeout)
    res = {**procs, **inproc}
    head = (f"{'op':15s} {'size':>7s} {'device ms':>10s} {'host ms':>10s} {'gloo ms':>10s} "
            f"{'device/host':>12s} {'device/gloo':>12s}")
    print(f"ranks {args.ranks}; load {load:.2f} (1-min, at start) on {os.cpu_count()} cores; "
          "time = slowest rank's median")
    print(head + "\n" + "-" * len(head))
    rows = []
    for op in OPS:
        for size in sizes:
            d, h, g = (res[(op, size, t)] for t in ("device", "host", "gloo"))
            rows.append({"op": op, "size": size, "device_s": d, "host_s": h, "gloo_s": g})
            print(f"{op:15s} {fmt_size(size):>7s} {d * 1e3:10.3f} {h * 1e3:10.3f} {g * 1e3:10.3f} "
                  f"{d / h:12.2f} {d / g:12.2f}")
    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(), "load_at_start": load,
           "args": {"ranks": args.ranks, "sizes": list(sizes), "iter_scale": args.iter_scale}, "rows": rows}
    print(f"\nresults: {save_results(doc, args.out, 'transports', started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
