"""Runs a worker script of tests/dist_workers under torchrun (as
`python -m torch.distributed.run`), for the tests/test_dist_*.py files."""

import os
import subprocess
import sys

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_workers")


def torchrun(script, *args, nproc=2, timeout=240, env=None):
    """Runs tests/dist_workers/<script> on `nproc` local ranks; returns
    (returncode, combined output). A run past `timeout` seconds fails."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "--max-restarts", "0", os.path.join(WORKERS, script), *args]
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    # Each worker sees as many CPU-plugin devices as there are local ranks
    # (LOCAL_WORLD_SIZE), so set_device(LOCAL_RANK) works as on CUDA.
    e.pop("TORCH_TPU_NUM_DEVICES", None)
    e.update(env or {})
    try:
        p = subprocess.run(cmd, cwd=WORKERS, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired as t:
        out = t.stdout.decode() if isinstance(t.stdout, bytes) else (t.stdout or "")
        raise AssertionError(f"torchrun {script} {args} hung past {timeout}s:\n{out[-4000:]}") from None
    return p.returncode, p.stdout


def run_ok(script, *args, nproc=2, timeout=240, env=None):
    """torchrun that must succeed with every rank reporting its cases."""
    rc, out = torchrun(script, *args, nproc=nproc, timeout=timeout, env=env)
    assert rc == 0, f"torchrun {script} {args} failed (exit {rc}):\n{out[-6000:]}"
    for r in range(nproc):
        assert f"rank {r}: " in out and "cases passed" in out, out[-4000:]
    return out
