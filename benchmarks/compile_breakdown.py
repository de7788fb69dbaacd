"""Where a torch_tpu compiled step spends its time: each compiled graph's
program timed alone (synchronised before and after), beside the plain step.

    python benchmarks/compile_breakdown.py mlp          # or gpt2, llama_decode, convnet
"""
import argparse
import collections
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.compiler import compiled_graph  # noqa: E402
from workloads import ALL, torch as torch_workloads  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=ALL)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch_tpu.compiler.register()
    w = torch_workloads.build(args.workload, "tpu")
    w.engine_compile(lambda f: torch.compile(f, backend="tpu"))
    for _ in range(3):
        w.step()
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        w.step()
    torch.tpu.synchronize()
    step_ms = (time.perf_counter() - t0) / args.steps * 1e3

    times = collections.defaultdict(list)
    run = compiled_graph.CompiledGraph.__call__

    def timed(self, *a):
        torch.tpu.synchronize()
        t = time.perf_counter()
        out = run(self, *a)
        torch.tpu.synchronize()
        times[self.name].append(time.perf_counter() - t)
        return out

    compiled_graph.CompiledGraph.__call__ = timed
    for _ in range(args.steps):
        w.step()
    compiled_graph.CompiledGraph.__call__ = run
    print(f"{args.workload}: step {step_ms:.2f} ms (not synchronised per graph)")
    total = 0.0
    for name, ts in times.items():
        ms = statistics.median(ts) * 1e3 * len(ts) / args.steps
        total += ms
        print(f"  {name:<16} {len(ts) / args.steps:.0f} call(s)/step  {ms:8.2f} ms/step")
    print(f"  sum of graphs    {total:8.2f} ms/step; compile_stats: {torch_tpu.compile_stats()['compiles']} compiles")


if __name__ == "__main__":
    main()
