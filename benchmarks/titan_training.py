"""TorchTitan benchmark: TorchTitan 0.3.0's llama3 debug model trained on tpu
(eager and compiled) against TorchTitan's own trainer on the CPU with gloo, in one run.

    .venv-2.14/bin/python benchmarks/titan_training.py            # seq 256 x batch 4, 10 steps per run
    .venv-2.14/bin/python benchmarks/titan_training.py --quick    # seq 64 x batch 2, 4 steps, ranks 1,2

Needs `bash scripts/setup.sh --titan` (.venv-2.14). Every run is one torchrun of
examples/torchtitan/run.py's command (`--config llama3_debugmodel_sdpa`, float32,
SAC on), all from one seed checkpoint (DCP, written first by a 1-rank tpu run), so
their losses agree and the `loss 1 / last` columns show they trained the same model:

    tpu eager, FSDP2            at 1, 2 and 4 ranks (--ranks)
    tpu compiled, FSDP2         2 ranks, `--compile.enable --compile.backend tpu`
    CPU + gloo, FSDP2           2 ranks, examples/torchtitan/cpu_train.py (plain PyTorch, no torch_tpu)

Each tpu run gets its own empty TORCH_TPU_CACHE_DIR, so its first step compiles
every XLA program cold.

Figures, all from TorchTitan's own log lines:
- tokens/s per rank: TorchTitan's `tps`, median over steps 3..N; total = x ranks.
- steps/s: (N - 2) / (time of step N's line - time of step 2's line).
- first step (s): step 1's line - the "Training starts at step 1" line (latest rank):
  the first batch, tracing and compiling included (Dynamo + XLA for compiled runs).
Ratios: tpu eager / CPU and tpu compiled / CPU tokens/s, compiled / eager first step.

Prints one table and writes benchmarks/results/torchtitan_<stamp>.json (and
torchtitan_latest.json).
"""
import argparse
import datetime
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples" / "torchtitan"))
from machine_info import machine, save_results  # noqa: E402

_STAMP = re.compile(r"^\[titan\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"step:\s*(\d+)\s+loss:")
COMPILE = ["--compile.enable", "--compile.backend=tpu"]


def _time(line):
    m = _STAMP.match(line)
    if not m:
        return None
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def step_times(log):
    """{step: time of its first log line}, and the latest "Training starts" time."""
    steps, start = {}, None
    for line in _ANSI.sub("", log).splitlines():
        t = _time(line)
        if t is None:
            continue
        if "Training starts at step" in line:
            start = t if start is None else max(start, t)
        m = _STEP.search(line)
        if m:
            steps.setdefault(int(m.group(1)), t)
    return steps, start


def summarize(name, device, ranks, losses, speed, log, wall):
    steps, start = step_times(log)
    last = max(steps)
    tps = [t for s, (t, _) in speed.items() if s >= 3] or [t for t, _ in speed.values()]
    per_rank = statistics.median(tps)
    return {"status": "ok", "name": name, "device": device, "ranks": ranks, "steps": last,
            "tokens_per_s_per_rank": per_rank, "tokens_per_s": per_rank * ranks,
            "steps_per_s": (last - 2) / (steps[last] - steps[2]) if last > 2 and steps[last] > steps[2] else None,
            "first_step_s": steps[1] - start if start is not None else None,
            "losses": losses, "process_s": wall}


def run(name, device, ranks, extra, args, seed_args, workdir):
    from run import run_titan

    env = {"TORCH_TPU_CACHE_DIR": tempfile.mkdtemp(prefix="cache_", dir=workdir)}
    t0 = time.perf_counter()
    try:
        losses, speed, log = run_titan(workdir / name, ranks, args.steps, seed_args + [
            f"--parallelism.data_parallel_shard_degree={ranks}", *extra], echo=False, timeout=args.timeout,
            extra_env=env, device=device, seq_len=args.seq_len, batch=args.batch)
    except Exception as e:  # reported with its reason; the other runs go on
        return {"status": "failed", "name": name, "device": device, "ranks": ranks, "reason": str(e)[-3000:]}
    return summarize(name, device, ranks, losses, speed, log, time.perf_counter() - t0)


def _width(fmt):
    digits = fmt.split(".")[0].rstrip("dfs")
    return int(digits) if digits else 0


def _f(v, fmt):
    return "-".rjust(_width(fmt)) if v is None else format(v, fmt)


def table(rows, extra=()):
    """One line per run; `extra` adds columns: (header, key, format) each."""
    head = (f"{'run':28s} {'ranks':>5s} {'tok/s/rank':>10s} {'tok/s':>8s} {'steps/s':>8s} {'first s':>8s} "
            + "".join(f"{h:>{_width(fmt)}s} " for h, _, fmt in extra)
            + f"{'loss 1':>8s} {'loss last':>9s}")
    out = [head, "-" * len(head)]
    for r in rows:
        if r["status"] != "ok":
            out.append(f"{r['name']:28s} {r['ranks']:5d} FAILED: {r['reason'].strip().splitlines()[-1][:80]}")
            continue
        ls = r["losses"]
        out.append(f"{r['name']:28s} {r['ranks']:5d} {r['tokens_per_s_per_rank']:10.0f} {r['tokens_per_s']:8.0f} "
                   f"{_f(r['steps_per_s'], '8.3f')} {_f(r['first_step_s'], '8.1f')} "
                   + "".join(f"{_f(r.get(key), fmt)} " for _, key, fmt in extra)
                   + f"{ls[min(ls)]:8.5f} {ls[max(ls)]:9.5f}")
    return "\n".join(out)


def ratios(by_name):
    def ok(n):
        return by_name.get(n, {}).get("status") == "ok"
    res = {}
    cpu = "cpu_gloo_fsdp2_2"
    for n in ("tpu_eager_fsdp2_2", "tpu_compiled_fsdp2_2"):
        if ok(n) and ok(cpu):
            res[f"{n} / {cpu} tokens/s"] = by_name[n]["tokens_per_s"] / by_name[cpu]["tokens_per_s"]
    if ok("tpu_eager_fsdp2_2") and ok("tpu_compiled_fsdp2_2"):
        res["compiled / eager first step"] = (by_name["tpu_compiled_fsdp2_2"]["first_step_s"]
                                              / by_name["tpu_eager_fsdp2_2"]["first_step_s"])
        res["compiled / eager tokens/s"] = (by_name["tpu_compiled_fsdp2_2"]["tokens_per_s"]
                                            / by_name["tpu_eager_fsdp2_2"]["tokens_per_s"])
    for n, label in (("tpu_eager_fsdp2_2", "eager"), ("tpu_compiled_fsdp2_2", "compiled")):
        if ok(n) and ok(cpu):
            a, b = by_name[n]["losses"], by_name[cpu]["losses"]
            res[f"max |loss tpu {label} - loss CPU| (2 ranks)"] = max(abs(a[s] - b[s]) for s in a if s in b)
    return res


def parse_args(description, steps, seq_len, batch, timeout, quick, ranks_help=None, always_ranks=(), configs=()):
    """The command line of the TorchTitan benchmarks (this one and moe.py) -> (args, sorted rank counts).
    `quick`: what --quick sets, (steps, seq_len, batch, ranks); `always_ranks` join --ranks; `configs`: the
    choices of --config (the first is the default; none: no --config)."""
    q_steps, q_seq_len, q_batch, q_ranks = quick
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="1,2,4", help=ranks_help)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--seq-len", type=int, default=seq_len)
    p.add_argument("--batch", type=int, default=batch, help="local batch per rank")
    p.add_argument("--quick", action="store_true",
                   help=f"seq {q_seq_len}, batch {q_batch}, {q_steps} steps, ranks {q_ranks}")
    p.add_argument("--timeout", type=int, default=timeout, help="seconds per torchrun")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--workdir", default="", help="run folders (default: a temporary folder)")
    if configs:
        p.add_argument("--config", choices=configs, default=configs[0], help="tpu_configs' TorchTitan config")
    args = p.parse_args()
    if args.quick:
        args.steps, args.seq_len, args.batch, args.ranks = quick
    try:
        ranks = sorted({int(r) for r in args.ranks.split(",") if r} | set(always_ranks))
    except ValueError:
        raise SystemExit(f"--ranks must be comma-separated integers, got {args.ranks!r}")
    if args.steps < 3:
        raise SystemExit("--steps must be at least 3 (steps/s is timed from step 2)")
    return args, ranks


def seed_checkpoint(workdir, args, **titan):
    """Writes TorchTitan's step-0 checkpoint (DCP) with a 1-rank tpu run in workdir/seed -> the arguments that
    start a run from it. `titan`: more of run_titan's arguments (config=...)."""
    from run import SEED_FLAGS, run_titan, seed_start_flags

    run_titan(workdir / "seed", 1, 1, SEED_FLAGS, echo=False, timeout=args.timeout, seq_len=args.seq_len,
              batch=args.batch, **titan)
    return seed_start_flags(workdir / "seed")


def finish(stem, started, args, ranks, rows, rat, key_width, legend=None):
    """Prints the ratios `rat`, a note when the ranks outnumber the cores, and `legend`; writes
    benchmarks/results/<stem>_<stamp>.json -> the exit status: 0 when every run was ok."""
    for k, v in rat.items():
        print(f"{k:{key_width}s} {v:.3g}")
    if max(ranks) > os.cpu_count():
        print(f"note: {max(ranks)} ranks on {os.cpu_count()} cores oversubscribe the CPU")
    if legend:
        print(legend)
    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
           "args": {"ranks": ranks, "steps": args.steps, "seq_len": args.seq_len, "batch": args.batch,
                    "quick": args.quick}, "results": {r["name"]: r for r in rows}, "ratios": rat}
    path = save_results(doc, args.out, stem, started)
    print(f"results: {path}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def main():
    args, ranks = parse_args(__doc__, steps=10, seq_len=256, batch=4, timeout=900, quick=(4, 64, 2, "1,2"),
                             ranks_help="tpu eager rank counts for steps/s (2 is always run)", always_ranks=(2,))
    os.environ.pop("TORCH_TPU_NUM_DEVICES", None)  # each rank sees LOCAL_WORLD_SIZE devices

    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="torchtitan_bench_"))
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; TorchTitan llama3_debugmodel_sdpa, "
          f"seq {args.seq_len} x local batch {args.batch}, float32, SAC, {args.steps} steps per run; "
          f"runs in {workdir}", flush=True)
    seed_args = seed_checkpoint(workdir, args)

    plan = [(f"tpu_eager_fsdp2_{n}", "tpu", n, []) for n in ranks]
    plan += [("tpu_compiled_fsdp2_2", "tpu", 2, COMPILE), ("cpu_gloo_fsdp2_2", "cpu", 2, [])]
    rows = []
    for name, device, n, extra in plan:
        r = run(name, device, n, extra, args, seed_args, workdir)
        rows.append(r)
        print(f"{name}: " + ("ok" if r["status"] == "ok" else "FAILED"), flush=True)
    print("\n" + table(rows))
    legend = ("tok/s/rank: TorchTitan's tps (median, steps >= 3); steps/s from its step-line times, steps 2..N; "
              "first s: step 1, cold XLA program cache (tracing + compiling included)")
    return finish("torchtitan", started, args, ranks, rows, ratios({r["name"]: r for r in rows}), key_width=55,
                  legend=legend)


if __name__ == "__main__":
    sys.exit(main())
