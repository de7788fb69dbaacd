"""What torch.profiler costs on tpu: an eager op loop and a torch.compile'd
step, timed with the profiler never used ("not imported": torch_tpu.profiler
and a profile() call absent from the process), imported but off, and on
(activities CPU + PrivateUse1, device events recorded). Each mode runs in its
own process; prints the median per-iteration time and each mode's ratio to
"not imported".

    .venv/bin/python benchmarks/profiler_overhead.py [--ops 2000] [--steps 200] [--repeats 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import json, statistics, sys, time
import torch, torch_tpu
mode, ops, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if mode != "not imported":
    import torch_tpu.profiler
    from torch.profiler import ProfilerActivity, profile

x = torch.randn(64, 64, device="tpu")
w = torch.randn(64, 64, device="tpu")

def eager_loop():
    y = x
    for _ in range(ops):
        y = y * 0.5 + x
    torch.tpu.synchronize()

step_fn = torch.compile(lambda a: torch.relu(a @ w).sum(dim=0) + a[0], backend="tpu")

def compiled_loop():
    y = x
    for _ in range(steps):
        y = step_fn(x)
    torch.tpu.synchronize()

def timed(fn, n):
    fn()  # compile and warm
    out = []
    for _ in range(repeats):
        if mode == "on":
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
                t0 = time.perf_counter(); fn(); t = time.perf_counter() - t0
        else:
            t0 = time.perf_counter(); fn(); t = time.perf_counter() - t0
        out.append(t / n * 1e6)
    return statistics.median(out)

print(json.dumps({"eager_us_per_op": timed(eager_loop, 2 * ops), "compiled_us_per_step": timed(compiled_loop, steps)}))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    modes = ("not imported", "off", "on")
    results = {}
    for mode in modes:
        p = subprocess.run([sys.executable, "-c", CHILD, mode, str(a.ops), str(a.steps), str(a.repeats)],
                           capture_output=True, text=True, env=dict(os.environ), check=False)
        if p.returncode != 0:
            sys.exit(f"profiler_overhead: mode {mode!r} failed:\n{p.stderr[-3000:]}")
        results[mode] = json.loads(p.stdout.strip().splitlines()[-1])
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"load average {load}; median of {a.repeats} runs; eager: {a.ops} iterations of 2 ops, "
          f"compiled: {a.steps} steps")
    print(f"{'mode':<14}{'eager us/op':>14}{'ratio':>8}{'compiled us/step':>19}{'ratio':>8}")
    base = results["not imported"]
    for mode in modes:
        r = results[mode]
        print(f"{mode:<14}{r['eager_us_per_op']:>14.2f}{r['eager_us_per_op'] / base['eager_us_per_op']:>8.2f}"
              f"{r['compiled_us_per_step']:>19.2f}{r['compiled_us_per_step'] / base['compiled_us_per_step']:>8.2f}")


if __name__ == "__main__":
    main()
