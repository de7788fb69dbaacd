"""Smoke test of the benchmark harness: benchmarks/run.py --quick on one
workload, CPU eager and torch_tpu eager, plus engines that may be missing.
Checks the results JSON has numbers, that both engines computed the same
first loss, and that an unavailable engine is reported missing with a reason
(never dropped). About 30 s."""
import json
import math
import os
import subprocess
import sys

import pytest
import torch_tpu
from torch_tpu import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_harness(tmp_path, engines, workload="mlp"):
    env = dict(os.environ)
    # The runners import the same torch_tpu as this test process.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(torch_tpu.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    env["TORCH_XLA_PYTHON"] = str(tmp_path / "no_such_venv" / "bin" / "python")
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--no-chart",
           "--workloads", workload, "--engines", ",".join(engines), "--out", str(tmp_path), "--timeout", "240"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(tmp_path / "latest.json") as f:
        return json.load(f), p.stdout


def test_quick_run_reports_numbers_and_missing_engines(tmp_path):
    engines = ["torch_eager", "tpu_eager", "tpu_fused", "tpu_compile", "torch_xla"]
    doc, stdout = run_harness(tmp_path, engines)
    results = doc["results"]["mlp"]
    assert list(results) == engines  # every engine asked for is in the results

    for engine in ("torch_eager", "tpu_eager"):
        r = results[engine]
        assert r["status"] == "ok", r
        for key in ("step_s", "step_cpu_s", "first_step_s", "first_step_warm_s", "memory_bytes", "check_first"):
            assert isinstance(r[key], float) or isinstance(r[key], int), (engine, key, r[key])
            assert math.isfinite(r[key]) and r[key] > 0, (engine, key, r[key])
    assert results["tpu_eager"]["memory_kind"] == "torch.tpu.max_memory_allocated"
    assert results["tpu_eager"]["fallback_ops"] == {}
    # Same initial values and batch: the same first loss on both devices.
    assert math.isclose(results["tpu_eager"]["check_first"], results["torch_eager"]["check_first"], rel_tol=1e-4)

    # The PyTorch/XLA venv was pointed at a folder that does not exist.
    assert results["torch_xla"]["status"] == "missing"
    assert "setup_torch_xla.sh" in results["torch_xla"]["reason"]
    for engine in ("tpu_fused", "tpu_compile"):  # missing until written, then they must run
        r = results[engine]
        assert r["status"] in ("ok", "missing"), r
        assert r["status"] == "ok" or r["reason"]
    for engine in engines:  # the printed table names every engine
        assert engine in stdout
    assert "MISSING" in stdout


def test_device_checks_quick_pairs_on_and_off(tmp_path):
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(torch_tpu.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "device_checks.py"), "--quick", "--workloads", "mlp",
           "--engines", "tpu_eager", "--out", str(tmp_path), "--timeout", "240"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(tmp_path / "device_checks_latest.json") as f:
        r = json.load(f)["results"]["mlp"]["tpu_eager"]
    assert r["status"] == "ok", r
    for key in ("step_s", "step_cpu_s"):
        assert len(r[key]["on"]) == len(r[key]["off"]) == 1
        assert math.isfinite(r[key]["ratio"]) and r[key]["ratio"] > 0
    assert "worst CPU-time ratio" in p.stdout


def test_unknown_engine_is_refused(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--engines", "tpu_turbo",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "unknown engine: tpu_turbo" in p.stderr


def test_collectives_quick_prints_a_table_and_json(tmp_path):
    """benchmarks/collectives.py --quick: 2 ranks under torchrun, tpu_dist and
    gloo side by side; the table has a row per (collective, size) with
    positive times, bandwidths and ratio, and the JSON has both transports."""
    import re
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(torch_tpu.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "collectives.py"), "--quick",
           "--out", str(tmp_path), "--timeout", "240"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "ranks 2" in p.stdout
    row = re.compile(r"^(all_reduce|all_gather|reduce_scatter)\s+(\d+ [KM]iB)"
                     r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")
    rows = {}
    for line in p.stdout.splitlines():
        m = row.match(line)
        if m:
            rows[(m.group(1), m.group(2))] = [float(v) for v in m.groups()[2:]]
    want = {(op, s) for op in ("all_reduce", "all_gather", "reduce_scatter") for s in ("4 KiB", "64 KiB", "1 MiB")}
    assert set(rows) == want, p.stdout
    for key, (t_ms, t_bw, g_ms, g_bw, ratio) in rows.items():
        assert t_ms > 0 and g_ms > 0 and t_bw > 0 and g_bw > 0, (key, rows[key])
        assert math.isclose(ratio, t_ms / g_ms, rel_tol=0.05, abs_tol=0.01), (key, rows[key])

    with open(tmp_path / "collectives_latest.json") as f:
        doc = json.load(f)
    result = doc["results"]["2"]
    assert result["status"] == "ok"
    assert {(r["op"], r["transport"]) for r in result["rows"]} == {
        (op, t) for op in ("all_reduce", "all_gather", "reduce_scatter") for t in ("tpu_dist", "gloo")}
    for r in result["rows"]:
        assert len(r["rank_median_s"]) == 2 and r["time_s"] == max(r["rank_median_s"]) > 0
        factor = 2 * (2 - 1) / 2 if r["op"] == "all_reduce" else (2 - 1) / 2
        assert math.isclose(r["busbw_GBps"], r["size"] / r["time_s"] * factor / 1e9, rel_tol=1e-9)


def test_collectives_bad_ranks_are_refused(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "collectives.py"), "--ranks", "3",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "unsupported --ranks 3" in p.stderr


TITAN_PYTHON = os.path.join(ROOT, ".venv-2.14", "bin", "python")


@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"),
                    reason="heavy tier: set TORCH_TPU_HEAVY=1 (benchmarks/titan_training.py --quick: 6 torchruns, ~3 min)")
@pytest.mark.skipif(not os.path.exists(TITAN_PYTHON), reason="needs `bash scripts/setup.sh --titan` (.venv-2.14)")
def test_torchtitan_quick_prints_table_and_json(tmp_path):
    """benchmarks/titan_training.py --quick: tpu eager at 1 and 2 ranks, tpu compiled
    and CPU + gloo at 2 ranks, from one seed checkpoint; every run has positive
    tokens/s and first-step time, and the 2-rank runs logged the same losses."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_NUM_DEVICES"}
    cmd = [TITAN_PYTHON, os.path.join(ROOT, "benchmarks", "titan_training.py"), "--quick", "--out", str(tmp_path),
           "--workdir", str(tmp_path / "runs"), "--timeout", "600"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/", timeout=1500)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(tmp_path / "torchtitan_latest.json") as f:
        doc = json.load(f)
    names = ["tpu_eager_fsdp2_1", "tpu_eager_fsdp2_2", "tpu_compiled_fsdp2_2", "cpu_gloo_fsdp2_2"]
    assert sorted(doc["results"]) == sorted(names)
    for name in names:
        r = doc["results"][name]
        assert r["status"] == "ok", r
        assert r["tokens_per_s"] > 0 and r["first_step_s"] > 0 and r["steps_per_s"] > 0, r
        assert name in p.stdout
    cpu = doc["results"]["cpu_gloo_fsdp2_2"]["losses"]
    for name in ("tpu_eager_fsdp2_2", "tpu_compiled_fsdp2_2"):
        got = doc["results"][name]["losses"]
        assert got.keys() == cpu.keys()
        assert all(math.isclose(got[s], cpu[s], abs_tol=2e-5) for s in cpu), (name, got, cpu)
    assert "tokens/s" in p.stdout and "first step" in p.stdout
