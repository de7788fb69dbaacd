"""What torch.profiler costs on tpu: an eager op loop and a torch.compile'd
step, timed with the profiler never used ("not imported": torch_tpu.profiler
and a profile() call absent from the process), imported but off, and on
(activities CPU + PrivateUse1, device events recorded). "not imported" runs
in its own processes; off and on alternate within one process. Prints the
median per-iteration time and each mode's ratio to "not imported", and on/off.

    .venv/bin/python benchmarks/profiler_overhead.py [--ops 2000] [--steps 200] [--repeats 4] [--rounds 3]
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
torch_tpu.set_eager_mode("strict")  # the eager loop's rows are programs per op
imported, ops, steps, repeats = sys.argv[1] == "imported", int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if imported:
    import torch_tpu.profiler  # noqa: F401
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
    for _ in range(steps):
        step_fn(x)
    torch.tpu.synchronize()

def once(fn, n, on):
    if on:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            t0 = time.perf_counter(); fn(); t = time.perf_counter() - t0
    else:
        t0 = time.perf_counter(); fn(); t = time.perf_counter() - t0
    return t / n * 1e6

# Off and on alternate in one process, so that both see the same load.
modes = ("off", "on") if imported else ("not imported",)
out = {m: {"eager_us_per_op": [], "compiled_us_per_step": []} for m in modes}
eager_loop(); compiled_loop()  # compile and warm
for r in range(repeats):
    for m in (modes if r % 2 == 0 else modes[::-1]):  # alternate which goes first
        out[m]["eager_us_per_op"].append(once(eager_loop, 2 * ops, m == "on"))
        out[m]["compiled_us_per_step"].append(once(compiled_loop, steps, m == "on"))
print(json.dumps(out))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    modes = ("not imported", "off", "on")
    samples = {m: {"eager_us_per_op": [], "compiled_us_per_step": []} for m in modes}
    for rnd in range(a.rounds):  # the processes alternate (and which goes first), so slow spells hit both
        for kind in ("not imported", "imported")[:: 1 if rnd % 2 == 0 else -1]:
            p = subprocess.run([sys.executable, "-P", "-c", CHILD, kind, str(a.ops), str(a.steps), str(a.repeats)],
                               capture_output=True, text=True, env=dict(os.environ), check=False)
            if p.returncode != 0:
                sys.exit(f"profiler_overhead: the {kind!r} process failed:\n{p.stderr[-3000:]}")
            for mode, r in json.loads(p.stdout.strip().splitlines()[-1]).items():
                for k, v in r.items():
                    samples[mode][k] += v
    results = {m: {k: statistics.median(v) for k, v in r.items()} for m, r in samples.items()}
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"load average {load}; median of {a.rounds} processes x {a.repeats} runs per mode; "
          f"eager: {a.ops} iterations of 2 ops, compiled: {a.steps} steps; off and on alternate in one process")
    print(f"{'mode':<14}{'eager us/op':>14}{'ratio':>8}{'compiled us/step':>19}{'ratio':>8}")
    base = results["not imported"]
    for mode in modes:
        r = results[mode]
        print(f"{mode:<14}{r['eager_us_per_op']:>14.2f}{r['eager_us_per_op'] / base['eager_us_per_op']:>8.2f}"
              f"{r['compiled_us_per_step']:>19.2f}{r['compiled_us_per_step'] / base['compiled_us_per_step']:>8.2f}")
    on, off = results["on"], results["off"]
    print(f"on / off (same processes): eager {on['eager_us_per_op'] / off['eager_us_per_op']:.2f}, "
          f"compiled {on['compiled_us_per_step'] / off['compiled_us_per_step']:.2f}")


if __name__ == "__main__":
    main()
