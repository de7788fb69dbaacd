"""Checks torch_tpu.tune against an exhaustive search, on benchmarks/run.py's
workloads (through benchmarks/tune_workload.py) and TorchTitan's debug model
(`torchtitan`, benchmarks/tune_titan.py; run it with .venv-2.14's python):

    python benchmarks/tune_check.py --workloads mlp,convnet --budget 180
    .venv-2.14/bin/python benchmarks/tune_check.py --workloads torchtitan --budget 240

For each workload:
1. the tuner runs with --budget (its own choice of what to measure);
2. every candidate of the same space (each mode; with --allow-precision also
   each matmul precision with each mode) is measured in --repeats fresh
   processes of --sample seconds of timed steps, in alternating order;
3. it reports whether the tuner's pick is within 5% of the exhaustive best,
   never slower than the default (beyond the exhaustive measurement's noise),
   and whether the tuner kept its budget.
Both measure with the tuner's own worker (fresh process, warm-up excluded).
Writes benchmarks/results/tune_check_<stamp>.json.
"""
import argparse
import datetime
import itertools
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from workloads import ALL, NAMES  # noqa: E402

import torch_tpu.tune as tt  # noqa: E402
from torch_tpu.tune import noise, runner, space, workload  # noqa: E402

SCRIPT = os.path.join(HERE, "tune_workload.py")
# Workloads that are scripts of their own (no script arguments).
SCRIPTS = {"torchtitan": os.path.join(HERE, "tune_titan.py")}


def script_of(name):
    """(script, script arguments) of a workload name."""
    return (SCRIPTS[name], []) if name in SCRIPTS else (SCRIPT, [name])


def space_of(info, allow_precision):
    modes = ["strict", "fused", "compile"] + (["trainstep"] if info["training"] else [])
    precisions = list(space.PRECISIONS) if allow_precision else ["highest"]
    return [space.normalized({"mode": m, "matmul_precision": p}) for m, p in itertools.product(modes, precisions)]


def exhaustive(source, candidates, repeats, sample_s, timeout):
    runs = {json.dumps(c, sort_keys=True): [] for c in candidates}
    cache = tempfile.mkdtemp(prefix="tune_check_")
    for r in range(repeats):
        order = candidates if r % 2 == 0 else list(reversed(candidates))
        for c in order:
            res = runner.run({"workload": source, "candidate": c, "sample_s": sample_s}, timeout, cache)
            key = json.dumps(c, sort_keys=True)
            runs[key].append(res)
            step = f"{res['step_s'] * 1e3:.2f} ms" if res["status"] == "ok" else res["status"]
            print(f"  exhaustive {space.label(c):40s} {step}", file=sys.stderr, flush=True)
    return runs


def check(name, args):
    print(f"[{name}] tuner, budget {args.budget:.0f} s", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    script, script_args = script_of(name)
    result = tt.tune(script, script_args=script_args, budget_s=args.budget, knobs=["mode"] + (
        ["matmul_precision"] if args.allow_precision else []), allow_precision=args.allow_precision,
        progress=not args.quiet)
    tuner_s = time.monotonic() - t0
    source = workload.describe(script, script_args)
    info = result.default.ok_runs[0]["info"]
    cands = space_of(info, args.allow_precision)
    runs = exhaustive(source, cands, args.repeats, args.sample, args.timeout)
    steps = {k: statistics.median(r["step_s"] for r in v if r["status"] == "ok") for k, v in runs.items()
             if any(r["status"] == "ok" for r in v)}
    spreads = {k: noise.spread([r for r in v if r["status"] == "ok"]) for k, v in runs.items() if k in steps}
    best_key = min(steps, key=steps.get)
    pick_key = json.dumps(result.settings, sort_keys=True)
    default_key = json.dumps({}, sort_keys=True)
    pick_s, best_s, default_s = steps.get(pick_key), steps[best_key], steps.get(default_key)
    tol = max(spreads.get(pick_key, 0), spreads.get(default_key, 0))
    doc = {"workload": name, "pick": result.pick.label, "pick_settings": result.settings,
           "best": space.label(json.loads(best_key)), "pick_s": pick_s, "best_s": best_s, "default_s": default_s,
           "pick_over_best": pick_s / best_s if pick_s else None,
           "within_5pct": bool(pick_s and pick_s <= 1.05 * best_s),
           "not_slower_than_default": bool(pick_s and default_s and pick_s <= default_s * (1 + tol)),
           "noise": tol, "tuner_s": tuner_s, "budget_s": args.budget, "kept_budget": tuner_s <= args.budget,
           "exhaustive": {space.label(json.loads(k)): v for k, v in steps.items()},
           "tuner_table": result.table()}
    print(result.table(), file=sys.stderr)
    return doc


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(NAMES))
    p.add_argument("--budget", type=float, default=180.0, help="the tuner's budget per workload, seconds")
    p.add_argument("--repeats", type=int, default=2, help="exhaustive: fresh processes per candidate")
    p.add_argument("--sample", type=float, default=2.0, help="exhaustive: seconds of timed steps per process")
    p.add_argument("--timeout", type=float, default=600.0, help="exhaustive: seconds per process")
    p.add_argument("--allow-precision", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    names = [n for n in args.workloads.split(",") if n]
    bad = [n for n in names if n not in ALL and n not in SCRIPTS]
    if bad:
        raise SystemExit(f"unknown workloads {bad} (choose from {', '.join(list(ALL) + list(SCRIPTS))})")
    started = datetime.datetime.now(datetime.timezone.utc)
    docs = [check(n, args) for n in names]
    print(f"\n{'workload':14s} {'pick':28s} {'best':28s} {'pick/best':>9s} {'<=5%':>5s} {'>=default':>9s} "
          f"{'tuner s':>8s} {'budget':>7s}")
    for d in docs:
        print(f"{d['workload']:14s} {d['pick'][:28]:28s} {d['best'][:28]:28s} {d['pick_over_best'] or 0:9.3f} "
              f"{'yes' if d['within_5pct'] else 'NO':>5s} {'yes' if d['not_slower_than_default'] else 'NO':>9s} "
              f"{d['tuner_s']:8.0f} {'kept' if d['kept_budget'] else 'OVER':>7s}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"tune_check_{started.strftime('%Y%m%dT%H%M%SZ')}.json")
    with open(path, "w") as f:
        json.dump({"date": started.isoformat(timespec="seconds"), "args": vars(args), "results": docs}, f, indent=1)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
