"""Runs one measurement in a fresh Python process (torch_tpu.tune.worker) and
returns its result dict. A crash, a missing result or the deadline passing is
a result too ("failed", "oom", "timeout"), never an exception: the tuner goes
on with the other candidates.

Every worker of one tuning run shares a private persistent compile cache
folder, so the first measurement of a candidate compiles cold (its compile
time is real) and its repeats load the programs from disk, as a user's
second start would.
"""
import json
import os
import subprocess
import sys
import time

import torch_tpu

from . import space

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(torch_tpu.__file__)))


def run(spec, timeout_s, cache_dir):
    """-> result dict with "status" and "process_s" (the process's wall time)."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_PARENT] + paths)
    env["TORCH_TPU_CACHE_DIR"] = cache_dir
    env.pop("TORCH_TPU_TUNED", None)  # a worker measures its candidate, not a tuned file's settings
    env.pop("TORCH_TPU_EAGER_MODE", None)
    env.pop("TORCH_TPU_SHAPE_BUCKETS", None)
    if "layout" in spec["candidate"]:  # one device per rank, in the worker's process
        env["TORCH_TPU_NUM_DEVICES"] = str(space.parse_layout(spec["candidate"]["layout"])[1])
    cmd = [sys.executable, "-P", "-m", "torch_tpu.tune.worker", json.dumps(spec)]
    t0 = time.perf_counter()
    if timeout_s <= 0:
        return {"status": "timeout", "reason": "no time left in the budget", "process_s": 0.0}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": f"stopped at the budget's deadline ({timeout_s:.0f} s)",
                "process_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("TUNE_RESULT "):
            result = json.loads(line[len("TUNE_RESULT "):])
            result["process_s"] = wall
            if result["status"] != "ok":
                result["stderr_tail"] = p.stderr[-2000:]
            return result
    return {"status": "failed", "reason": f"worker exited {p.returncode} without a result",
            "stderr_tail": p.stderr[-2000:], "process_s": wall}
