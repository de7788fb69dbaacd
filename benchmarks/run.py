"""Benchmark harness: every engine on every workload, one run, this machine.

    python benchmarks/run.py                       # all engines, the default workloads
    python benchmarks/run.py --quick --engines torch_eager,tpu_eager --workloads mlp   # smoke test only
    python benchmarks/run.py --workloads gpt_100m --engines tpu_eager,tpu_fused,jax_jit   # not in the default run
    bash benchmarks/setup_torch_xla.sh             # once, for the torch_xla engine

Each (engine, workload) runs in a fresh process twice: cold (an empty compile
cache folder) and warm (a second process on the same folder), so time to first
step is measured both ways. Steady step time is the median of --steps steps
after warmup, from the cold process. An engine that is missing or fails is
listed with its reason. --quick (3 steps after 1 warmup) is a smoke test that the
engines run and agree; its times are not measurements (fused eager and the
compiled engines are still settling after their first steps). Prints a table and ratios, writes
benchmarks/results/<stamp>.json and <stamp>.png (and latest.json, latest.png).
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine_info import machine  # noqa: E402
from report import chart, print_tables  # noqa: E402
from workloads import ALL, NAMES as WORKLOADS  # noqa: E402

ENGINES = ("torch_eager", "torch_inductor", "tpu_eager", "tpu_fused", "tpu_compile", "tpu_trainstep", "jax_jit",
           "torch_xla")
XLA_PYTHON = os.environ.get("TORCH_XLA_PYTHON", os.path.join(HERE, ".venv_torch_xla", "bin", "python"))


def run_one(python, engine, workload, steps, warmup, cache_dir, timeout):
    """One runner process -> its result dict; a crash or timeout is a 'failed' result."""
    cmd = [python, os.path.join(HERE, "runner.py"), "--engine", engine, "--workload", workload,
           "--steps", str(steps), "--warmup", str(warmup), "--cache-dir", cache_dir]
    env = dict(os.environ)
    if engine == "torch_xla":
        env.pop("PYTHONPATH", None)  # the project's torch_tpu build is for another torch
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=HERE)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timed out after {timeout}s"}
    wall = time.perf_counter() - t0
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("BENCH_JSON "):
            result = json.loads(line[len("BENCH_JSON "):])
            result["process_s"] = wall
            if result["status"] == "failed":
                result["stderr_tail"] = p.stderr[-1500:]
            return result
    return {"status": "failed", "reason": f"runner exited {p.returncode} without a result",
            "stderr_tail": p.stderr[-1500:]}


def bench(engine, workload, args):
    if engine == "torch_xla" and not os.path.exists(XLA_PYTHON):
        return {"status": "missing",
                "reason": f"no PyTorch/XLA venv at {XLA_PYTHON}: run bash benchmarks/setup_torch_xla.sh"}
    python = XLA_PYTHON if engine == "torch_xla" else sys.executable
    cache_dir = tempfile.mkdtemp(prefix=f"bench_{engine}_{workload}_")
    try:
        cold = run_one(python, engine, workload, args.steps, args.warmup, cache_dir, args.timeout)
        if cold["status"] == "ok" and not args.no_warm:
            warm = run_one(python, engine, workload, 0, 0, cache_dir, args.timeout)
            cold["first_step_warm_s"] = warm.get("first_step_s")
            if warm["status"] != "ok":
                cold["warm_status"] = f"{warm['status']}: {warm.get('reason')}"
        return cold
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def split(s, allowed, what):
    names = [n for n in s.split(",") if n]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (choose from {', '.join(allowed)})")
    return names


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"default: {','.join(WORKLOADS)}; also: {','.join(w for w in ALL if w not in WORKLOADS)}")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--steps", type=int, default=20, help="timed steps per engine and workload")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    p.add_argument("--quick", action="store_true", help="smoke test only (3 steps, 1 warmup): checks that every engine runs and agrees; "
                        "its step times are not measurements")
    p.add_argument("--no-warm", action="store_true", help="skip the warm-cache second process")
    p.add_argument("--no-chart", action="store_true")
    p.add_argument("--timeout", type=int, default=900, help="seconds per runner process")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--torch-threads", type=int, default=0,
                   help="OMP_NUM_THREADS for the runners (PyTorch's CPU kernels); default: its own choice. "
                        "On a loaded machine PyTorch's OpenMP threads wait on each other at every op")
    args = p.parse_args()
    if args.quick:
        args.steps, args.warmup = 3, 1
    if args.steps < 1:
        raise SystemExit("--steps must be at least 1")
    if args.torch_threads:
        os.environ["OMP_NUM_THREADS"] = str(args.torch_threads)
    workloads = split(args.workloads, ALL, "workload")
    engines = split(args.engines, ENGINES, "engine")

    started = datetime.datetime.now(datetime.timezone.utc)
    results = {w: {} for w in workloads}
    for w in workloads:
        for e in engines:
            r = bench(e, w, args)
            results[w][e] = r
            step = f"{r['step_s'] * 1e3:.2f} ms/step" if r["status"] == "ok" else r.get("reason", "")
            print(f"[{w:12s} {e:14s}] {r['status']:7s} {step}", file=sys.stderr, flush=True)

    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
           "args": {"steps": args.steps, "warmup": args.warmup, "quick": args.quick,
                    "omp_num_threads": os.environ.get("OMP_NUM_THREADS")},
           "results": results}
    print_tables(doc)
    os.makedirs(args.out, exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(args.out, f"{stamp}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    shutil.copyfile(path, os.path.join(args.out, "latest.json"))
    print(f"\nresults: {path}")
    if not args.no_chart:
        png = os.path.join(args.out, f"{stamp}.png")
        reason = chart(doc, png)
        if reason:
            print(f"chart: not written ({reason})")
        else:
            shutil.copyfile(png, os.path.join(args.out, "latest.png"))
            print(f"chart: {png}")


if __name__ == "__main__":
    main()
