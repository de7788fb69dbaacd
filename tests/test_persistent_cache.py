"""The persistent compile cache, across processes: a second process loads its
programs from disk and compiles nothing; corrupt entries are ignored and
replaced; the size cap holds; TORCH_TPU_CACHE=0 writes nothing.

Each case runs a small workload in a fresh Python process with its own
TORCH_TPU_CACHE_DIR (a temp folder)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

# Run away from the repository root, whose source torch_tpu (without _C)
# would shadow the built package on `python -c`'s sys.path.
NEUTRAL_CWD = os.path.dirname(os.path.abspath(__file__))

WORKLOAD = textwrap.dedent(
    """
    import json, sys
    import torch, torch_tpu
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    w = torch.randn(16, 4, requires_grad=True)
    xt, wt = x.to("tpu"), w.detach().to("tpu").requires_grad_()
    y = (xt @ wt).relu()
    loss = (y * y).sum()
    loss.backward()
    out = {
        "y": y.cpu().tolist(),
        "loss": loss.item(),
        "grad": wt.grad.cpu().tolist(),
        "info": torch_tpu.cache_info(),
        "dir": torch_tpu.persistent_cache_dir(),
    }
    print("RESULT " + json.dumps(out))
    """
)


def run_workload(cache_dir, **env_overrides):
    env = dict(os.environ)
    env.pop("TORCH_TPU_CACHE", None)
    env.pop("TORCH_TPU_CACHE_MAX_BYTES", None)
    if cache_dir is not None:
        env["TORCH_TPU_CACHE_DIR"] = str(cache_dir)
    env.update(env_overrides)
    proc = subprocess.run([sys.executable, "-c", WORKLOAD], capture_output=True, text=True, env=env, timeout=240,
                          cwd=NEUTRAL_CWD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def expected():
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    w = torch.randn(16, 4, requires_grad=True)
    y = (x @ w).relu()
    loss = (y * y).sum()
    loss.backward()
    return y, loss, w.grad


def assert_right(res):
    y, loss, grad = expected()
    torch.testing.assert_close(torch.tensor(res["y"]), y)
    torch.testing.assert_close(torch.tensor(res["grad"]), grad)
    assert abs(res["loss"] - loss.item()) <= 1e-4 * max(1.0, abs(loss.item()))


def entries(d):
    return sorted(Path(d).glob("*.tpuexe"))


def test_second_process_loads_from_disk(tmp_path):
    cold = run_workload(tmp_path)
    assert_right(cold)
    ci = cold["info"]
    assert cold["dir"] == str(tmp_path)
    assert ci["compiles"] > 0 and ci["disk_hits"] == 0
    assert ci["disk_misses"] == ci["compiles"]
    assert ci["disk_writes"] == ci["compiles"]
    assert len(entries(tmp_path)) == ci["compiles"]
    assert ci["disk_entries"] == ci["compiles"]
    assert ci["disk_bytes"] == sum(p.stat().st_size for p in entries(tmp_path))

    warm = run_workload(tmp_path)
    assert_right(warm)
    wi = warm["info"]
    assert wi["compiles"] == 0, "the warm process compiled"
    assert wi["disk_hits"] == ci["compiles"]
    assert wi["disk_misses"] == 0 and wi["disk_writes"] == 0 and wi["disk_rejected"] == 0
    assert wi["misses"] == ci["misses"]  # the same programs, from disk instead of XLA


def test_corrupt_entries_are_replaced(tmp_path):
    cold = run_workload(tmp_path)
    files = entries(tmp_path)
    assert len(files) >= 4
    # One flipped byte, one truncated, one emptied, one holding another key's entry.
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    files[0].write_bytes(bytes(data))
    files[1].write_bytes(files[1].read_bytes()[:-7])
    files[2].write_bytes(b"")
    files[3].write_bytes(files[4 if len(files) > 4 else 0].read_bytes())

    res = run_workload(tmp_path)
    assert_right(res)
    info = res["info"]
    assert info["disk_rejected"] == 4
    assert info["compiles"] == 4 and info["disk_writes"] == 4
    assert info["disk_hits"] == cold["info"]["compiles"] - 4

    again = run_workload(tmp_path)
    assert_right(again)
    assert again["info"]["compiles"] == 0 and again["info"]["disk_rejected"] == 0


def test_size_cap_is_enforced(tmp_path):
    cold = run_workload(tmp_path / "free")
    sizes = [p.stat().st_size for p in entries(tmp_path / "free")]
    cap = sum(sorted(sizes)[-3:]) + 100  # room for about three entries
    capped = tmp_path / "capped"
    res = run_workload(capped, TORCH_TPU_CACHE_MAX_BYTES=str(cap))
    assert_right(res)
    on_disk = sum(p.stat().st_size for p in entries(capped))
    assert on_disk <= cap
    assert res["info"]["disk_evictions"] > 0
    assert res["info"]["disk_writes"] == cold["info"]["compiles"]
    assert 0 < len(entries(capped)) < len(sizes)
    # Malformed caps are refused with the variable's name.
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(capped), TORCH_TPU_CACHE_MAX_BYTES="plenty")
    proc = subprocess.run([sys.executable, "-c", WORKLOAD], capture_output=True, text=True, env=env, timeout=240,
                          cwd=NEUTRAL_CWD)
    assert proc.returncode != 0 and "TORCH_TPU_CACHE_MAX_BYTES=plenty" in proc.stderr


def test_disabled_writes_nothing(tmp_path):
    target = tmp_path / "never"
    res = run_workload(target, TORCH_TPU_CACHE="0")
    assert_right(res)
    info = res["info"]
    assert res["dir"] is None
    assert info["compiles"] > 0
    assert info["disk_hits"] == info["disk_misses"] == info["disk_writes"] == 0
    assert not target.exists()


def test_default_folder_follows_xdg(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    saved = os.environ.pop("TORCH_TPU_CACHE_DIR", None)
    try:
        res = run_workload(None, **env)
    finally:
        if saved is not None:
            os.environ["TORCH_TPU_CACHE_DIR"] = saved
    assert res["dir"] == str(tmp_path / "xdg" / "torch_tpu")
    assert len(entries(tmp_path / "xdg" / "torch_tpu")) == res["info"]["compiles"] > 0


def test_concurrent_processes_share_a_folder(tmp_path):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKLOAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=NEUTRAL_CWD)
        for _ in range(3)
    ]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        assert_right(json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[7:]))
    res = run_workload(tmp_path)
    assert_right(res)
    assert res["info"]["compiles"] == 0 and res["info"]["disk_rejected"] == 0
    assert not list(tmp_path.glob(".tmp-*")), "a temporary file was left behind"


def test_in_process_counters_present():
    import torch_tpu

    (torch.ones(3, device="tpu") + 1).cpu()
    info = torch_tpu.cache_info()
    keys = ("disk_hits", "disk_misses", "disk_rejected", "disk_writes", "disk_evictions", "disk_bytes", "disk_entries")
    for k in keys:
        assert k in info and info[k] >= 0
    # The test session runs on its own temporary folder (conftest.py).
    assert torch_tpu.persistent_cache_dir() == torch_tpu.settings.get("TORCH_TPU_CACHE_DIR")
