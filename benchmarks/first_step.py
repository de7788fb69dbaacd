"""Time to first step, cold vs warm persistent compile cache.

Runs the quickstart's training (examples/quickstart.py: a 3-layer MLP, AdamW,
201 steps) in fresh processes: with the cache off (TORCH_TPU_CACHE=0, the
baseline), with an empty cache folder (cold: every program is compiled by XLA
and stored), then again on the same folder (warm: every program is loaded
from disk). Prints, per run, the process's wall time,
the time from process start to the end of the first training step (its loss
read back), the time of the whole training loop, and the compile / disk-hit
counts.

    python benchmarks/first_step.py [--warm-runs 2] [--cache-dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD_FLAG = "--child"
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def child():
    t_start = float(os.environ["TT_FIRST_STEP_T0"])  # the parent's clock at spawn
    sys.path.insert(0, EXAMPLES)
    import quickstart  # examples/quickstart.py: loads torch and torch_tpu (import_s)
    import torch

    import torch_tpu

    t_import = time.time()
    x, y, model, opt = quickstart.setup(torch.device("tpu"))

    t_loop = time.time()
    first_step = value = None

    def report(step, loss):
        nonlocal first_step, value
        value = loss
        if step == 0:
            first_step = time.time()

    quickstart.train(x, y, model, opt, report)
    t_end = time.time()
    info = torch_tpu.cache_info()
    print("RESULT " + json.dumps({
        "import_s": t_import - t_start,
        "setup_s": t_loop - t_import,
        "first_step_s": first_step - t_start,
        "first_step_only_s": first_step - t_loop,
        "loop_s": t_end - t_loop,
        "final_loss": value,
        "compiles": info["compiles"],
        "compile_seconds": info["compile_seconds"],
        "disk_hits": info["disk_hits"],
        "disk_misses": info["disk_misses"],
        "disk_load_seconds": info["disk_load_seconds"],
        "disk_store_seconds": info["disk_store_seconds"],
        "disk_bytes": info["disk_bytes"],
    }))


def run_child(cache_dir):
    """One run in a fresh process; cache_dir None: the cache off."""
    env = dict(os.environ, TT_FIRST_STEP_T0=repr(time.time()))
    env.pop("TORCH_TPU_CACHE", None)
    if cache_dir is None:
        env["TORCH_TPU_CACHE"] = "0"
    else:
        env["TORCH_TPU_CACHE_DIR"] = cache_dir
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), CHILD_FLAG], capture_output=True, text=True,
                          env=env, cwd=os.path.dirname(os.path.abspath(__file__)))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    res = json.loads(line[len("RESULT "):])
    res["process_s"] = wall
    return res


def main():
    if CHILD_FLAG in sys.argv:
        child()
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warm-runs", type=int, default=2)
    ap.add_argument("--cache-dir", help="folder to use (emptied first); default: a new temp folder")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="torch_tpu_first_step_") as tmp:
        cache = args.cache_dir or os.path.join(tmp, "cache")
        if args.cache_dir and os.path.isdir(cache):
            for f in os.listdir(cache):
                if f.endswith(".tpuexe"):
                    os.unlink(os.path.join(cache, f))
        runs = [("off", run_child(None)), ("cold", run_child(cache))]
        runs += [(f"warm {i + 1}", run_child(cache)) for i in range(args.warm_runs)]
    hdr = (f"{'run':<8} {'process':>8} {'import':>7} {'setup':>6} {'1st step':>9} {'(step)':>7} {'loop':>7} "
           f"{'compiles':>8} {'compile s':>9} {'store s':>7} {'disk hits':>9} {'load s':>7}")
    print("quickstart MLP (201 AdamW steps), seconds; '1st step' counts from process start")
    print(hdr)
    for name, r in runs:
        print(f"{name:<8} {r['process_s']:8.2f} {r['import_s']:7.2f} {r['setup_s']:6.2f} {r['first_step_s']:9.2f} "
              f"{r['first_step_only_s']:7.2f} {r['loop_s']:7.2f} {r['compiles']:8d} {r['compile_seconds']:9.2f} "
              f"{r['disk_store_seconds']:7.3f} {r['disk_hits']:9d} {r['disk_load_seconds']:7.3f}")
    cold, warm = runs[1][1], min((r for _, r in runs[2:]), key=lambda r: r["first_step_s"], default=None)
    if warm:
        print(f"time to first step: cold {cold['first_step_s']:.2f} s, warm {warm['first_step_s']:.2f} s "
              f"({cold['first_step_s'] / warm['first_step_s']:.1f}x); whole process: cold {cold['process_s']:.2f} s, "
              f"warm {warm['process_s']:.2f} s; cache {cold['disk_bytes'] / 1e6:.1f} MB")
    if args.json:
        print(json.dumps(dict(runs)))


if __name__ == "__main__":
    main()
