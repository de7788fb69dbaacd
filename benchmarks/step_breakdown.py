"""Where a training step's wall time goes: a per-step host budget.

    python benchmarks/step_breakdown.py [--workloads mlp,gpt2] [--modes compiled,strict,fused,trainstep]
                                        [--steps 10] [--warmup 3]

Each (workload, mode) runs in a fresh process: the workload's step
(benchmarks/workloads, as run.py's engines build it), --warmup steps, then
--steps steps each waited on (torch.tpu.synchronize). Per step (medians):

  wall        the step until its results are ready
  python      the host's CPU time outside any op: the step's Python, Dynamo's
              guards and wrappers, autograd's bookkeeping (host - dispatch -
              transfers)
  dispatch    the host's CPU time inside the outermost ATen ops and compiled
              graph calls (tpu::program): the dispatcher, cache lookups,
              lowering-cache hits and program launches
  transfers   the host's CPU time in the outermost copies and reads to the
              host (_to_copy, copy_, _local_scalar_dense, item)
  program     CPU time of XLA's threads (every thread but the main one and
              autograd's device thread): the programs themselves, summed over
              threads, so a multi-threaded matmul may count more than its wall
  idle        wall - host - program, at least 0: time neither the host nor a
              program ran on a core (waits, and descheduling on a busy machine)
  programs    programs launched per step (program cache hits and misses)

host = the main thread's and autograd's device thread (pt_autograd_*) CPU time
per step, from /proc/self/task/*/schedstat (nanoseconds, this process only).
The split of host time into dispatch and transfers comes from one more step
run under torch.profiler (CPU activity), scaled to the unprofiled host time, so
the profiler's own cost is not counted. The profiler gives wall time inside
ops, so an op that waits (a read to the host waiting for its program, a
blocking launch) counts its wait as dispatch or transfer; the shares are
capped at the host's CPU time, and python then reads 0 (a known limit of this
first version: a CPU-time split needs per-op thread CPU timers). Program time is a CPU time: the XLA CPU
plugin runs programs on its own threads (tf_XLAEigen and PJRT's workers).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("compiled", "strict", "fused", "trainstep")
TRANSFERS = ("aten::_to_copy", "aten::copy_", "aten::_local_scalar_dense", "aten::item")
HOST_THREADS = ("pt_autograd",)


def thread_cpu_ns():
    """{(tid, name): CPU ns} for every thread of this process."""
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/self/task/{t}/schedstat") as f:
                ns = int(f.read().split()[0])
        except OSError:  # the thread ended
            continue
        out[(int(t), comm)] = ns
    return out


def split_cpu(before, after):
    """(host s, program s) of the CPU time between two thread_cpu_ns()."""
    host = program = 0
    pid = os.getpid()
    for key, ns in after.items():
        d = ns - before.get(key, 0)
        if key[0] == pid or key[1].startswith(HOST_THREADS):
            host += d
        else:
            program += d
    return host / 1e9, program / 1e9


def programs_run(torch_tpu):
    modes = torch_tpu.cache_info()["modes"]
    return sum(m["hits"] + m["misses"] for m in modes.values())


def outermost(events, wanted):
    """Sum of durations (s) of events named by `wanted` with no ancestor so named."""
    total = 0.0
    for e in events:
        if not wanted(e.name):
            continue
        p = e.cpu_parent
        while p is not None and not wanted(p.name):
            p = p.cpu_parent
        if p is None:
            total += e.time_range.elapsed_us() / 1e6
    return total


def is_op(name):
    return name.startswith("aten::") or name.startswith("tpu::program")


def profiled_split(torch, step, sync):
    """(dispatch share, transfer share) of the host's time in one profiled step."""
    from torch.profiler import ProfilerActivity, profile
    before = thread_cpu_ns()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        sync(step())
    host, _ = split_cpu(before, thread_cpu_ns())
    events = prof.events()
    ops = outermost(events, is_op)
    transfers = outermost(events, lambda n: n in TRANSFERS)
    host = max(host, 1e-9)
    return min(1.0, ops / host) - min(1.0, transfers / host), min(1.0, transfers / host)


def measure(workload, mode, steps, warmup):
    """Runs in the child process; returns the per-step breakdown."""
    sys.path.insert(0, HERE)
    import torch
    import torch_tpu
    from workloads import torch as torch_workloads
    torch.set_flush_denormal(True)
    torch_tpu.set_eager_mode("fused" if mode == "fused" else "strict")
    w = torch_workloads.build(workload, "tpu")
    if mode in ("compiled", "trainstep"):
        torch_tpu.compiler.register()
        parts = getattr(w.fn, "parts", None)
        if mode == "trainstep" and parts is not None:
            model, opt, loss_fn = parts
            w.fn = torch_tpu.TrainStep(model, loss_fn, opt)
        else:
            w.engine_compile(lambda fn: torch.compile(fn, backend="tpu"))

    def sync(out):
        torch.tpu.synchronize()
        return out

    for _ in range(warmup):
        sync(w.step())
    rows = []
    for _ in range(steps):
        n0, c0, t0 = programs_run(torch_tpu), thread_cpu_ns(), time.perf_counter()
        sync(w.step())
        wall = time.perf_counter() - t0
        host, program = split_cpu(c0, thread_cpu_ns())
        rows.append((wall, host, program, programs_run(torch_tpu) - n0))
    dispatch_share, transfer_share = profiled_split(torch, w.step, sync)
    wall, host, program, n = (statistics.median(r[i] for r in rows) for i in range(4))
    dispatch, transfers = host * dispatch_share, host * transfer_share
    return {"workload": workload, "mode": mode, "wall": wall, "python": host - dispatch - transfers,
            "dispatch": dispatch, "transfers": transfers, "program": program,
            "idle": max(0.0, wall - host - program), "programs": n, "host": host}


def run_child(workload, mode, steps, warmup, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", workload, mode,
           "--steps", str(steps), "--warmup", str(warmup)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/")
    except subprocess.TimeoutExpired:
        return {"workload": workload, "mode": mode, "error": f"timed out after {timeout}s"}
    for line in p.stdout.splitlines():
        if line.startswith("BREAKDOWN "):
            return json.loads(line[len("BREAKDOWN "):])
    return {"workload": workload, "mode": mode, "error": (p.stderr.strip().splitlines() or ["no output"])[-1]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workloads", default="mlp,gpt2")
    p.add_argument("--modes", default="compiled,strict,fused,trainstep")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--child", nargs=2, metavar=("WORKLOAD", "MODE"))
    a = p.parse_args()
    if a.child:
        print("BREAKDOWN " + json.dumps(measure(*a.child, a.steps, a.warmup)), flush=True)
        return
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        p.error(f"unknown modes {bad}; choose from {MODES}")
    with open("/proc/loadavg") as f:
        print(f"load average at start: {f.read().split()[0]}")
    cols = ("wall", "python", "dispatch", "transfers", "program", "idle")
    print(f"{'workload':9s} {'mode':10s} " + " ".join(f"{c + ' ms':>12s}" for c in cols) + f" {'programs':>9s}")
    for workload in a.workloads.split(","):
        for mode in modes:
            r = run_child(workload, mode, a.steps, a.warmup, a.timeout)
            if "error" in r:
                print(f"{workload:9s} {mode:10s} failed: {r['error']}")
                continue
            print(f"{workload:9s} {mode:10s} " + " ".join(f"{r[c] * 1e3:12.2f}" for c in cols)
                  + f" {r['programs']:9.0f}", flush=True)
    with open("/proc/loadavg") as f:
        print(f"load average at end: {f.read().split()[0]}")


if __name__ == "__main__":
    main()
