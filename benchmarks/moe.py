"""MoE benchmark: TorchTitan 0.3.0's Qwen3 MoE debug model (64 experts, top 8) trained on
tpu with FSDP2 x expert parallel against TorchTitan's own trainer on the CPU with gloo
(FSDP2, EP 1), at the same rank counts, in one run.

    .venv-2.14/bin/python benchmarks/moe.py                   # seq 128 x batch 2, 8 steps, ranks 1,2,4
    .venv-2.14/bin/python benchmarks/moe.py --quick           # seq 32 x batch 2, 5 steps, ranks 1,2
    .venv-2.14/bin/python benchmarks/moe.py --config qwen3_moe_debug_sdpa_2_layers   # 2 of the 8 layers

A tpu rank of the 8-layer model peaks near 11 GB of host memory on the CPU plugin, so 4 ranks
of it need more than a 24 GiB machine; the 2-layer config (the same blocks) fits.

Needs `bash scripts/setup.sh --titan`. Every run is examples/torchtitan/run.py's command with
`--config qwen3_moe_debug_sdpa` or its 2-layer variant (SDPA attention, the fixed-capacity EP dispatcher of
capacity_dispatcher.py), float32, from one seed checkpoint (written first by a 1-rank tpu
run), so the loss columns show the runs trained the same model:

    tpu  n ranks: FSDP n x EP n (EP 1 at 1 rank)
    CPU  n ranks: FSDP n, EP 1 (gloo's list all_to_all needs equal sizes; EP does not change the math)

Figures (benchmarks/titan_training.py's reading of TorchTitan's log lines): tokens/s per rank is
TorchTitan's `tps`, median over steps >= 3; total = x ranks; steps/s from step-line times,
steps 2..N; first step: cold XLA program cache. `built/step` is the most programs any tpu
rank built in one step after step 2 (program_counter.py), `built 1` those of step 1.
Ratio: tpu / CPU total tokens/s at each rank count.
"""
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples" / "torchtitan"))


def _titan_bench():
    """benchmarks/titan_training.py: its command line, seed run, log readers and report."""
    import titan_training
    return titan_training


_bench = _titan_bench()
summarize, _f = _bench.summarize, _bench._f

CONFIGS = ("qwen3_moe_debug_sdpa", "qwen3_moe_debug_sdpa_2_layers")


def parallel_args(device, ranks):
    args = [f"--parallelism.data_parallel_shard_degree={ranks}"]
    if device == "tpu" and ranks > 1:
        args.append(f"--parallelism.expert_parallel_degree={ranks}")
    return args


def run(device, ranks, args, seed_args, workdir):
    from run import run_titan, programs_built

    name = f"{device}_{'fsdp_ep' if device == 'tpu' and ranks > 1 else 'fsdp'}_{ranks}"
    env = {"TORCH_TPU_CACHE_DIR": tempfile.mkdtemp(prefix="cache_", dir=workdir)}
    t0 = time.perf_counter()
    try:
        losses, speed, log = run_titan(workdir / name, ranks, args.steps, seed_args + parallel_args(device, ranks),
                                       echo=False, timeout=args.timeout, extra_env=env, device=device,
                                       seq_len=args.seq_len, batch=args.batch, config=args.config)
    except Exception as e:  # reported with its reason; the other runs go on
        return {"status": "failed", "name": name, "device": device, "ranks": ranks, "reason": str(e)[-3000:]}
    row = summarize(name, device, ranks, losses, speed, log, time.perf_counter() - t0)
    built = programs_built(log)
    row["built_step_1"] = built.get(1)
    row["built_per_step_after_2"] = max((b for s, b in built.items() if s >= 3), default=None)
    return row


def table(rows):
    return _bench.table(rows, extra=(("built 1", "built_step_1", "7d"), ("built/step", "built_per_step_after_2", "10d")))


def ratios(rows):
    by = {(r["device"], r["ranks"]): r for r in rows if r["status"] == "ok"}
    res = {}
    for (device, n), r in sorted(by.items()):
        cpu = by.get(("cpu", n))
        if device == "tpu" and cpu:
            res[f"tpu / CPU tokens/s at {n} ranks"] = r["tokens_per_s"] / cpu["tokens_per_s"]
            res[f"max |loss tpu - loss CPU| at {n} ranks"] = max(
                abs(r["losses"][s] - cpu["losses"][s]) for s in r["losses"] if s in cpu["losses"])
    return res


def main():
    args, ranks = _bench.parse_args(__doc__, steps=8, seq_len=128, batch=2, timeout=1800, quick=(5, 32, 2, "1,2"),
                                    configs=CONFIGS)
    os.environ.pop("TORCH_TPU_NUM_DEVICES", None)  # each rank sees LOCAL_WORLD_SIZE devices

    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="moe_bench_"))
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; TorchTitan {args.config}, seq {args.seq_len} x "
          f"local batch {args.batch}, float32, {args.steps} steps per run; runs in {workdir}", flush=True)
    seed_args = _bench.seed_checkpoint(workdir, args, config=args.config)

    rows = []
    for n in ranks:
        for device in ("tpu", "cpu"):
            r = run(device, n, args, seed_args, workdir)
            rows.append(r)
            print(f"{r['name']}: " + ("ok" if r["status"] == "ok" else "FAILED"), f"(load {os.getloadavg()[0]:.2f})",
                  flush=True)
    print("\n" + table(rows))
    return _bench.finish("moe", started, args, ranks, rows, ratios(rows), key_width=45)


if __name__ == "__main__":
    sys.exit(main())
