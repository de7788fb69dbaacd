"""Times one engine on one workload in this process and prints one JSON line
(prefixed BENCH_JSON) on stdout. benchmarks/run.py starts one of these per
engine, workload and cache state, so a crash or a missing peer stays contained.

    python benchmarks/runner.py --engine tpu_eager --workload mlp --steps 20 --warmup 3 [--cache-dir D]

first_step_s: wall time of the first step, compile included, until its result
is ready. step_s: median of --steps steps after --warmup more, each waited on;
step_cpu_s: the median CPU time of this process (all its threads, XLA's
included) over the same steps, which other processes' load disturbs less.
With --steps 0 only the first step runs (the warm-cache measurement)."""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

T_START = time.perf_counter()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `workloads`, `engines`

from engines import ENGINES, Missing  # noqa: E402


def timed_step(engine, w):
    t0, c0 = time.perf_counter(), time.process_time()
    out = w.step()
    engine.sync(out)
    return time.perf_counter() - t0, out, time.process_time() - c0


def measure(engine, workload, steps, warmup):
    result = {}
    engine.load()
    result["import_s"] = time.perf_counter() - T_START
    result["info"] = engine.info()
    engine.start_memory()
    t0 = time.perf_counter()
    w = engine.build(workload)
    result["build_s"] = time.perf_counter() - t0
    result["first_step_s"], out, _ = timed_step(engine, w)
    result["check_first"] = engine.check(w, out)
    if steps:
        for _ in range(warmup):
            timed_step(engine, w)
        timed = [timed_step(engine, w) for _ in range(steps)]
        times = [t for t, _, _ in timed]
        out = w.step()  # one more, for the check value only (not timed)
        engine.sync(out)
        result["check_last"] = engine.check(w, out)
        result.update(step_s=statistics.median(times), step_min_s=min(times),
                      step_cpu_s=statistics.median(c for _, _, c in timed),
                      step_max_s=max(times), steps=steps, warmup=warmup)
    result["memory_bytes"], extra = engine.memory()
    result["memory_kind"] = engine.memory_kind
    result.update(extra)
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--engine", required=True, choices=sorted(ENGINES))
    p.add_argument("--workload", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--cache-dir", default="")
    a = p.parse_args()
    engine = ENGINES[a.engine]()
    engine.prepare(a.cache_dir)
    try:
        result = {"status": "ok", **measure(engine, a.workload, a.steps, a.warmup)}
    except Missing as e:
        result = {"status": "missing", "reason": str(e)}
    except Exception as e:  # reported as failed with its reason; run.py goes on
        traceback.print_exc()
        result = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:2000]}
    print("BENCH_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
