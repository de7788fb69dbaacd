"""Fused eager: a training step as one program (the cluster ends at the
optimizer's step(), TORCH_TPU_FUSED_STEP_END=optimizer) against two (it ends
at backward() too, =backward), in one process: both variants' programs are
built first, then blocks of steps alternate between them, so that both see
the same machine. Prints each block's median step time and the ratio per pair.

    .venv/bin/python benchmarks/fused_step_end.py --workloads mlp,gpt2,convnet --pairs 5 --steps 8
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

VARIANTS = ("backward", "optimizer")


def block(w, torch, eager_mode, variant, steps):
    """One block of `steps` timed steps after one untimed step (the switch)."""
    os.environ["TORCH_TPU_FUSED_STEP_END"] = variant
    eager_mode.reset_step_end()
    w.step()
    torch.tpu.synchronize()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        w.step()
        torch.tpu.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="mlp,gpt2,convnet")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    import torch
    import torch_tpu
    from torch_tpu import _eager_mode
    from workloads.torch import build
    torch_tpu.set_eager_mode("fused")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}; "
          f"{args.pairs} pairs of {args.steps}-step blocks per workload")
    for name in args.workloads.split(","):
        w = build(name, "tpu")
        for variant in VARIANTS:  # build every program both variants run
            for _ in range(3):
                block(w, torch, _eager_mode, variant, 1)
        times = {v: [] for v in VARIANTS}
        for _ in range(args.pairs):
            for variant in VARIANTS:
                times[variant].append(block(w, torch, _eager_mode, variant, args.steps))
        ratios = [o / b for b, o in zip(times["backward"], times["optimizer"])]
        for variant in VARIANTS:
            print(f"{name:8s} {variant:9s} ms/step: " + " ".join(f"{t * 1e3:.1f}" for t in times[variant]))
        print(f"{name:8s} one program / two, per pair: " + " ".join(f"{r:.2f}" for r in ratios)
              + f"   median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
