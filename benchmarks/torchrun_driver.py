"""The driver half of the benchmarks that run their own file as torchrun's
workers (collectives.py, scaling.py): the arguments both take, --ranks, and
one torchrun of N workers whose result is a JSON line they print."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def add_arguments(p):
    """--timeout, --out, and the hidden --worker that the driver passes to torchrun's processes."""
    p.add_argument("--timeout", type=int, default=600, help="seconds per torchrun")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def parse_ranks(text, allowed):
    """--ranks "2,4" -> [2, 4]; exits naming the choices when a count is not in `allowed`."""
    try:
        ranks = [int(r) for r in text.split(",") if r]
    except ValueError:
        raise SystemExit(f"--ranks must be comma-separated integers, got {text!r}")
    if not ranks or any(r not in allowed for r in ranks):
        raise SystemExit(f"unsupported --ranks {text}: choose from {', '.join(map(str, allowed))}")
    return ranks


def run_workers(script, n, worker_args, timeout, result_prefix, unset_env=()):
    """One torchrun of n processes of `script --worker *worker_args` -> (the JSON a worker printed after
    result_prefix, wall seconds, "") or (None, the reason, the output's tail). The workers inherit this
    environment (one OpenMP thread each unless set) less the variables in unset_env."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
           "--max-restarts", "0", os.path.abspath(script), "--worker", *worker_args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("OMP_NUM_THREADS", "1")
    for name in unset_env:
        env.pop(name, None)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env, cwd=HERE)
    except subprocess.TimeoutExpired as t:
        out = t.stdout.decode() if isinstance(t.stdout, bytes) else (t.stdout or "")
        return None, f"timed out after {timeout}s", out[-3000:]
    wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith(result_prefix):
            return json.loads(line[len(result_prefix):]), wall, ""
    return None, f"torchrun exited {p.returncode} without a result", p.stdout[-3000:]
