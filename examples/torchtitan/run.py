"""Trains TorchTitan's llama3 debug model on tpu under torchrun, with FSDP2.

    .venv-2.14/bin/python examples/torchtitan/run.py            # 2 ranks, 20 steps
    .venv-2.14/bin/python examples/torchtitan/run.py --nproc 1 --steps 10 -- --compile.enable
    .venv-2.14/bin/python examples/torchtitan/run.py --device cpu   # reference: TorchTitan on the CPU, gloo

Needs `bash scripts/setup.sh --titan`. Writes the tokenizer and dataset that
TorchTitan's config reads (make_assets.py) into --workdir, runs
`torchrun -m torchtitan.train --module tpu_configs --config llama3_debugmodel_sdpa`
there (TorchTitan finds the tpu device and the tpu_dist backend itself), shows
TorchTitan's own step lines (loss, tokens/s, MFU) as they come, and writes
loss.png. Arguments after `--` go to TorchTitan unchanged. `--device cpu` runs
the same command through cpu_train.py (TorchTitan's trainer on the CPU with gloo,
torch_tpu not loaded), the reference for the tpu runs.
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_assets import make_assets  # noqa: E402

# TorchTitan's step line: "step:  3  loss:  7.61  grad_norm: ...  tps: 1,234  tflops: ...  mfu: 0.01%"
STEP_LINE = re.compile(r"step:\s*(\d+)\s+loss:\s*([-\d.eE+naif]+).*?tps:\s*([\d,]+).*?mfu:\s*(\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


DEVICES = ("tpu", "cpu")


CONFIGS = ("llama3_debugmodel_sdpa", "qwen3_moe_debug_sdpa", "qwen3_moe_debug_sdpa_2_layers")
# program_counter.py's line: "tpu programs: rank 0 step 3 built 0 compiled 0 (0.00 s)"
PROGRAM_LINE = re.compile(r"tpu programs: rank (\d+) step (\d+) built (\d+) compiled (\d+)")


# A 1-rank run with these flags writes TorchTitan's step-0 checkpoint (DCP) in
# its folder; seed_start_flags(folder) starts other runs from it.
SEED_FLAGS = ["--checkpoint.enable", "--checkpoint.create_seed_checkpoint", "--parallelism.data_parallel_shard_degree=1"]


def seed_start_flags(seed_folder):
    """Flags that start a run from the step-0 checkpoint in seed_folder. The run only
    loads it: TorchTitan would otherwise save at its last step, which for the MoE
    model doubles a rank's memory (to ~11 GB) for a checkpoint nothing reads."""
    step0 = next((Path(seed_folder) / "outputs" / "checkpoint").glob("step-0"))
    return ["--checkpoint.enable", f"--checkpoint.initial_load_path={step0}", "--checkpoint.load_only"]


def titan_command(nproc: int, steps: int, extra=(), seq_len: int = 256, batch: int = 4, device: str = "tpu",
                  config: str = "llama3_debugmodel_sdpa"):
    """The torchrun command line; float32 parameters so that runs compare exactly.
    device "tpu": `-m torchtitan.train` unchanged; "cpu": the same trainer through
    cpu_train.py (TorchTitan's device set to cpu, backend gloo)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {CONFIGS}, got {config!r}")
    entry = ["-m", "torchtitan.train"] if device == "tpu" else [str(HERE / "cpu_train.py")]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            *entry, "--module", "tpu_configs", "--config", config,
            f"--training.steps={steps}", f"--training.seq_len={seq_len}", f"--training.local_batch_size={batch}",
            "--training.mixed_precision_param=float32", "--debug.seed=42",
            "--metrics.log_freq=1", *extra]


def titan_env(extra_env=None, device="tpu"):
    env = dict(os.environ)
    if device == "cpu":  # plain PyTorch: torch_tpu is not loaded
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    env.update(extra_env or {})
    return env


def run_titan(workdir, nproc, steps, extra=(), echo=True, timeout=None, extra_env=None, device="tpu", **kw):
    """Runs TorchTitan in `workdir` on `device` ("tpu", or "cpu" with gloo);
    returns ({step: loss}, {step: (tps, mfu)}, full log); programs_built(log) reads
    the per-step program counts of the qwen3 MoE config."""
    workdir = Path(workdir)
    make_assets(workdir)
    proc = subprocess.Popen(titan_command(nproc, steps, extra, device=device, **kw), cwd=workdir,
                            env=titan_env(extra_env, device),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    losses, speed, lines = {}, {}, []
    try:
        for line in proc.stdout:
            lines.append(line)
            m = STEP_LINE.search(_ANSI.sub("", line))
            if m and int(m.group(1)) in losses:
                continue  # every rank logs the step; show it once
            if m:
                step = int(m.group(1))
                losses[step] = float(m.group(2))
                speed[step] = (int(m.group(3).replace(",", "")), m.group(4))
            if echo and (m or "Error" in line or "tpu programs" in line or "Peak FLOPS" in line or "capacity" in line):
                print(_ANSI.sub("", line.rstrip()), flush=True)
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines)
    if proc.returncode != 0:
        raise RuntimeError(f"torchtitan exited with {proc.returncode}:\n{log[-6000:]}")
    return losses, speed, log


def programs_built(log: str) -> dict:
    """{step: programs built in that step, the most over ranks} from program_counter.py's lines."""
    built = {}
    for m in PROGRAM_LINE.finditer(_ANSI.sub("", log)):
        step = int(m.group(2))
        built[step] = max(built.get(step, 0), int(m.group(3)))
    return built


def plot(losses, path, device="tpu"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = sorted(losses)
    plt.figure(figsize=(6, 4))
    plt.plot(steps, [losses[s] for s in steps], marker="o")
    plt.xlabel("step"); plt.ylabel("loss"); plt.title(f"TorchTitan llama3 debug model on {device}")
    plt.grid(True); plt.tight_layout(); plt.savefig(path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", choices=DEVICES, default="tpu", help="cpu: TorchTitan on the CPU with gloo")
    p.add_argument("--config", choices=CONFIGS, default="llama3_debugmodel_sdpa")
    p.add_argument("--workdir", default=None, help="default /tmp/torchtitan_<device>")
    p.add_argument("titan_args", nargs="*", help="passed to torchtitan after --")
    a = p.parse_args()
    workdir = Path(a.workdir or f"/tmp/torchtitan_{a.device}")
    losses, speed, log = run_titan(workdir, a.nproc, a.steps, a.titan_args, device=a.device, config=a.config)
    out = workdir / "loss.png"
    plot(losses, out, a.device)
    (workdir / "titan.log").write_text(log)
    tps = [t for s, (t, _) in sorted(speed.items()) if s > 1]
    print(f"{len(losses)} steps, final loss {losses[max(losses)]:.4f}, "
          f"median tokens/s per rank after step 1: {sorted(tps)[len(tps) // 2] if tps else 'n/a'}; "
          f"plot: {out}; TorchTitan's log: {out.parent / 'titan.log'}")


if __name__ == "__main__":
    main()
