"""Collective benchmark: tpu_dist (tpu tensors) against gloo (CPU tensors).

    python benchmarks/collectives.py                 # ranks 2,4; 4 KiB to 64 MiB
    python benchmarks/collectives.py --ranks 2,4,8
    python benchmarks/collectives.py --quick         # 2 ranks, up to 1 MiB, few iterations

For each N in --ranks, one torchrun (python -m torch.distributed.run
--nproc-per-node N) runs this file with --worker. The workers join one group
"cpu:gloo,tpu:tpu_dist", so the same collective call goes to gloo for CPU
tensors and to tpu_dist for tpu tensors. For each collective (all_reduce,
all_gather_into_tensor, reduce_scatter_tensor), float32 message size and
transport, every rank times each call after warmup (tpu: until
torch.tpu.synchronize() returns), the two transports alternating call by
call; the reported time is the slowest rank's median. Sizes follow NCCL-tests: the full buffer (all_reduce's tensor,
all_gather's output, reduce_scatter's input). Bus bandwidth is NCCL-tests':
all_reduce size/time * 2(n-1)/n, all_gather and reduce_scatter
size/time * (n-1)/n. Prints one table per N and writes
benchmarks/results/collectives_<stamp>.json (and collectives_latest.json).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import machine, save_results  # noqa: E402
from torchrun_driver import add_arguments, parse_ranks, run_workers  # noqa: E402

OPS = ("all_reduce", "all_gather", "reduce_scatter")
TRANSPORTS = ("tpu_dist", "gloo")
DEVICES = {"tpu_dist": "tpu", "gloo": "cpu"}
KIB, MIB = 1024, 1024 * 1024
SIZES = (4 * KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB)
QUICK_SIZES = (4 * KIB, 64 * KIB, MIB)
ELEMENT_BYTES = 4  # float32
RESULT_PREFIX = "COLLBENCH_JSON "


def iterations(size, scale):
    """(warmup, timed) calls for a message of `size` bytes: fewer for big
    messages, so a full run stays within minutes on a small machine."""
    if size <= 64 * KIB:
        w, n = 3, 40
    elif size <= MIB:
        w, n = 2, 20
    elif size <= 16 * MIB:
        w, n = 1, 10
    else:
        w, n = 1, 5
    return w, max(1, round(n * scale))


def bus_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def fmt_size(size):
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


# ---------------------------------------------------------------- worker side

def worker(args):
    import torch
    import torch.distributed as dist
    import torch_tpu  # noqa: F401  (registers tpu_dist and the tpu device)

    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    rank, n = dist.get_rank(), dist.get_world_size()
    sizes = [int(s) for s in args.sizes.split(",")]

    def buffers(op, size, device):
        numel = size // ELEMENT_BYTES
        assert numel % n == 0, f"{size} bytes do not split over {n} ranks"
        # 1/n: repeated in-place all_reduce sums stay near 1 (no overflow to inf).
        full = torch.full((numel,), 1.0 / n, device=device)
        part = torch.empty((numel // n,), device=device)
        if op == "all_reduce":
            return lambda: dist.all_reduce(full)
        if op == "all_gather":
            part.fill_(1.0 / n)
            return lambda: dist.all_gather_into_tensor(full, part)
        return lambda: dist.reduce_scatter_tensor(part, full)

    def one_call(call, device):
        dist.barrier()  # gloo, CPU: every rank starts the call together
        t0 = time.perf_counter()
        call()
        if device == "tpu":
            torch.tpu.synchronize()
        return time.perf_counter() - t0

    rows = []
    for op in OPS:
        for size in sizes:
            warm, count = iterations(size, args.iter_scale)
            calls = {t: (buffers(op, size, DEVICES[t]), DEVICES[t]) for t in TRANSPORTS}
            times = {t: [] for t in TRANSPORTS}
            # The transports alternate call by call (order flipped each round),
            # so load from other processes on a shared machine hits both alike.
            for i in range(warm + count):
                for t in (TRANSPORTS if i % 2 == 0 else TRANSPORTS[::-1]):
                    dt = one_call(*calls[t])
                    if i >= warm:
                        times[t].append(dt)
            for t in TRANSPORTS:
                meds = [None] * n
                dist.all_gather_object(meds, statistics.median(times[t]))
                rows.append({"op": op, "size": size, "transport": t, "warmup": warm,
                             "iters": count, "rank_median_s": meds, "time_s": max(meds)})
            del calls
    if rank == 0:
        print(RESULT_PREFIX + json.dumps(rows), flush=True)
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------- driver side

def run_ranks(n, sizes, args):
    """One torchrun of n workers -> (their rows, wall seconds, "") or (None, the reason, the output's tail)."""
    worker_args = ["--sizes", ",".join(map(str, sizes)), "--iter-scale", str(args.iter_scale)]
    return run_workers(__file__, n, worker_args, args.timeout, RESULT_PREFIX)


def table(n, rows):
    """Text table for one N: per op and size, each transport's median time and
    bus bandwidth, and the time ratio tpu_dist/gloo."""
    by = {(r["op"], r["size"], r["transport"]): r for r in rows}
    head = (f"{'op':15s} {'size':>7s} {'tpu_dist ms':>12s} {'MB/s':>9s} "
            f"{'gloo ms':>10s} {'MB/s':>9s} {'tpu_dist/gloo':>14s}")
    lines = [f"ranks {n}", head, "-" * len(head)]
    for op in OPS:
        for size in sorted({r["size"] for r in rows if r["op"] == op}):
            t = by[(op, size, "tpu_dist")]["time_s"]
            g = by[(op, size, "gloo")]["time_s"]
            lines.append(f"{op:15s} {fmt_size(size):>7s} {t * 1e3:12.3f} {busbw(op, size, t, n) * 1e3:9.2f} "
                         f"{g * 1e3:10.3f} {busbw(op, size, g, n) * 1e3:9.2f} {t / g:14.2f}")
    return "\n".join(lines)


def busbw(op, size, seconds, n):
    """NCCL-tests bus bandwidth in GB/s (1e9 bytes/s; the table shows MB/s)."""
    return size / seconds * bus_factor(op, n) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="2,4", help="comma-separated process counts (2, 4, 8)")
    p.add_argument("--quick", action="store_true", help="smoke test: 2 ranks, up to 1 MiB, few iterations")
    p.add_argument("--iter-scale", type=float, default=1.0, help="multiplies the timed calls per size")
    add_arguments(p)
    p.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    ranks = parse_ranks(args.ranks, (2, 4, 8))
    sizes = SIZES
    if args.quick:
        ranks, sizes, args.iter_scale = [2], QUICK_SIZES, min(args.iter_scale, 0.2)

    started = datetime.datetime.now(datetime.timezone.utc)
    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
           "args": {"ranks": ranks, "sizes": list(sizes), "quick": args.quick, "iter_scale": args.iter_scale,
                    "dtype": "float32", "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "1")},
           "results": {}}
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"time = slowest rank's median; MB/s = NCCL-tests bus bandwidth (1e6 bytes/s)", flush=True)
    failed = False
    for n in ranks:
        rows, wall, tail = run_ranks(n, sizes, args)
        if rows is None:
            failed = True
            doc["results"][str(n)] = {"status": "failed", "reason": wall, "output_tail": tail}
            print(f"\nranks {n}: FAILED: {wall}\n{tail}", flush=True)
            continue
        for r in rows:
            r["busbw_GBps"] = busbw(r["op"], r["size"], r["time_s"], n)
        doc["results"][str(n)] = {"status": "ok", "process_s": wall, "rows": rows}
        print("\n" + table(n, rows), flush=True)

    path = save_results(doc, args.out, "collectives", started)
    print(f"\nresults: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
