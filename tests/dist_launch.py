"""Runs a worker script of tests/dist_workers under torchrun (as
`python -m torch.distributed.run`), for the tests/test_dist_*.py files."""

import os
import signal
import subprocess
import sys

import pytest

from torch_tpu import settings

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_workers")


def four_ranks(*values):
    """A 4-rank parametrization of a test whose 2-rank one runs in the default
    tier: heavy tier only (TORCH_TPU_HEAVY=1), for the CI time budget. The
    collectives (test_dist_collectives.py), an exited rank and the in-process
    device transport keep 4 ranks in the default tier."""
    return pytest.param(*values, marks=pytest.mark.skipif(
        not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (4 ranks; 2 run by default)"))


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
    p = subprocess.Popen(cmd, cwd=WORKERS, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_tree(p)
        out, _ = p.communicate()
        raise AssertionError(f"torchrun {script} {args} hung past {timeout}s:\n{out[-4000:]}") from None
    return p.returncode, out


def _descendants(pid):
    """Every live process below `pid` (torchrun starts its ranks in sessions
    of their own, so a process group does not reach them)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _stop_tree(p):
    """Stops torchrun and its ranks: SIGTERM first (torchrun then stops its
    ranks), SIGKILL for whatever is left."""
    ranks = _descendants(p.pid)
    p.terminate()
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    for pid in [p.pid, *ranks]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_ok(script, *args, nproc=2, timeout=240, env=None):
    """torchrun that must succeed with every rank reporting its cases."""
    rc, out = torchrun(script, *args, nproc=nproc, timeout=timeout, env=env)
    assert rc == 0, f"torchrun {script} {args} failed (exit {rc}):\n{out[-6000:]}"
    for r in range(nproc):
        assert f"rank {r}: " in out and "cases passed" in out, out[-4000:]
    return out
