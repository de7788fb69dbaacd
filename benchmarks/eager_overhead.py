"""Eager overhead: steady-state time per small op on tpu (program-cache hit)
next to PyTorch CPU eager, and the first-call compile time per op.

    .venv/bin/python benchmarks/eager_overhead.py

Each op runs on a small tensor so that the time measured is dispatch,
cache lookup, and PJRT launch, not arithmetic. tpu timings include waiting
for the result (torch.tpu.synchronize) once per batch of calls.
"""
import statistics
import time

import torch

import torch_tpu

OPS = {
    "add": lambda a, b: a + b,
    "mul_scalar": lambda a, b: a * 0.5,
    "relu": lambda a, b: torch.relu(a),
    "exp": lambda a, b: torch.exp(a),
    "sum": lambda a, b: a.sum(),
    "mm": lambda a, b: a @ b,
    "add_": lambda a, b: a.add_(b),
    "view+add": lambda a, b: a.t()[1:] + 1,
}


def bench(fn, a, b, sync, reps=200, rounds=5):
    fn(a, b)
    sync()
    times = []
    for _ in range(rounds):
        keep = []  # results stay alive so that synchronize() waits for every one
        t0 = time.perf_counter()
        for _ in range(reps):
            keep.append(fn(a, b))
        sync()
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def main():
    torch_tpu.set_eager_mode("strict")  # a program per op: the cost this measures
    print(f"torch {torch.__version__}; tpu = {torch.tpu.get_device_name()}")
    print(f"{'op':12s} {'cpu eager us':>13s} {'tpu eager us':>13s} {'ratio':>7s} {'first call ms':>14s}")
    rows = []
    for name, fn in OPS.items():
        a_c, b_c = torch.randn(8, 8), torch.randn(8, 8)
        a_t, b_t = a_c.to("tpu"), b_c.to("tpu")
        torch_tpu.cache_clear()
        t0 = time.perf_counter()
        fn(a_t, b_t)
        torch.tpu.synchronize()
        first = time.perf_counter() - t0
        cpu = bench(fn, a_c, b_c, lambda: None)
        tpu = bench(fn, a_t, b_t, torch.tpu.synchronize)
        rows.append((name, cpu, tpu, first))
        print(f"{name:12s} {cpu * 1e6:13.1f} {tpu * 1e6:13.1f} {tpu / cpu:7.1f} {first * 1e3:14.1f}")
    med = statistics.median(r[2] for r in rows)
    print(f"median tpu eager per op: {med * 1e6:.1f} us (target <= 30 us); "
          f"median first call: {statistics.median(r[3] for r in rows) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
