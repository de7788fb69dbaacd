"""What the device-side checks cost: every tpu engine on every workload of
benchmarks/run.py, with the checks on (the default) and off
(TORCH_TPU_DEVICE_CHECKS=0), in one run.

    python benchmarks/device_checks.py                    # 2 rounds, 20 steps
    python benchmarks/device_checks.py --quick            # 1 round, 3 steps
    python benchmarks/device_checks.py --workloads gpt2 --engines tpu_compile --rounds 4

Each (engine, workload) runs in fresh runner.py processes (the harness's
runner), in rounds ordered on, off, off, on, ... so that a drift in the
machine's load hits both settings alike. Each setting keeps its own
persistent compile cache, so only the first process of a setting compiles.
A round's cost is its paired ratio on / off of the step medians; the figure
reported is the median of those ratios, for wall time and for the process's
CPU time (its threads, XLA's included), which other processes' load
disturbs less. Target (issue 12): at most 1.03 on every workload.
"""
import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine_info import machine, save_results  # noqa: E402
from run import run_one, split  # noqa: E402
from workloads import ALL, NAMES as WORKLOADS  # noqa: E402

ENGINES = ("tpu_eager", "tpu_fused", "tpu_compile")
TARGET = 1.03


def one(engine, workload, checks_on, cache_dir, args):
    os.environ["TORCH_TPU_DEVICE_CHECKS"] = "1" if checks_on else "0"
    return run_one(sys.executable, engine, workload, args.steps, args.warmup, cache_dir, args.timeout)


def pair(engine, workload, args):
    """Rounds of (on, off) in alternating order -> summary dict."""
    dirs = {on: tempfile.mkdtemp(prefix=f"checks{int(on)}_{engine}_{workload}_") for on in (True, False)}
    runs = {True: [], False: []}
    try:
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for on in order:
                res = one(engine, workload, on, dirs[on], args)
                if res["status"] != "ok":
                    return {"status": res["status"], "reason": res.get("reason", "")[:300]}
                runs[on].append(res)
    finally:
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    out = {"status": "ok", "rounds": args.rounds}
    for key in ("step_s", "step_cpu_s"):
        on = [r[key] for r in runs[True]]
        off = [r[key] for r in runs[False]]
        out[key] = {"on": on, "off": off, "ratio": statistics.median(a / b for a, b in zip(on, off))}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--rounds", type=int, default=2, help="(on, off) pairs per engine and workload")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="smoke test: 1 round, 3 steps, 1 warmup")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    if args.quick:
        args.rounds, args.steps, args.warmup = 1, 3, 1
    if args.rounds < 1 or args.steps < 1:
        raise SystemExit("--rounds and --steps must be at least 1")
    workloads = split(args.workloads, ALL, "workload")
    engines = split(args.engines, ENGINES, "engine")
    saved = os.environ.get("TORCH_TPU_DEVICE_CHECKS")
    started = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()[0]
    results = {w: {} for w in workloads}
    try:
        for w in workloads:
            for e in engines:
                results[w][e] = r = pair(e, w, args)
                msg = (f"wall x{r['step_s']['ratio']:.3f}, cpu x{r['step_cpu_s']['ratio']:.3f}"
                       if r["status"] == "ok" else r["reason"])
                print(f"[{w:12s} {e:12s}] {msg}", file=sys.stderr, flush=True)
    finally:
        if saved is None:
            os.environ.pop("TORCH_TPU_DEVICE_CHECKS", None)
        else:
            os.environ["TORCH_TPU_DEVICE_CHECKS"] = saved

    print(f"\nDevice-check cost, checks on / off ({args.rounds} rounds of {args.steps} steps; "
          f"load average {load:.1f} at start; target <= {TARGET})")
    print(f"{'workload':12s} {'engine':12s} {'on ms':>8s} {'off ms':>8s} {'wall on/off':>11s} {'cpu on/off':>10s}")
    worst = 0.0
    for w in workloads:
        for e in engines:
            r = results[w][e]
            if r["status"] != "ok":
                print(f"{w:12s} {e:12s} {r['status']}: {r['reason']}")
                continue
            s = r["step_s"]
            worst = max(worst, r["step_cpu_s"]["ratio"])
            print(f"{w:12s} {e:12s} {statistics.median(s['on']) * 1e3:8.2f} {statistics.median(s['off']) * 1e3:8.2f} "
                  f"{s['ratio']:11.3f} {r['step_cpu_s']['ratio']:10.3f}")
    print(f"worst CPU-time ratio: {worst:.3f} ({'within' if worst <= TARGET else 'over'} the {TARGET} target)")
    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(), "load_avg_start": load,
           "args": vars(args), "results": results}
    print(f"results: {save_results(doc, args.out, 'device_checks', started)}")


if __name__ == "__main__":
    main()
