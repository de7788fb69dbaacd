"""Helion 1.5.1's Pallas backend on tpu tensors (the jax extra): its kernels
reach the kernel bridge through `JaxCallable` and `call_custom_kernel`, and
on the CPU plugin run through Pallas' interpret lowering. Each kernel equals
torch on the CPU and the same torch op on tpu (the XLA path), in float32 and
bfloat16; a listed-configs autotune and a budgeted search complete. The
kernels run in one fresh process (tests/kernel_workers/helion_kernels.py):
importing Helion configures Dynamo and inductor."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax", reason="the jax extra is not installed: bash scripts/setup.sh --jax")
pytest.importorskip("helion", reason="Helion is not installed: bash scripts/setup.sh --jax")

from run_once import once_per_run  # noqa: E402

WORKER = os.path.join(os.path.dirname(__file__), "kernel_workers", "helion_kernels.py")
# largest difference allowed (|a - b| / (1 + |b|)), per dtype: bfloat16 results
# may round one ulp apart (a kernel accumulates in float32 in its own order)
TOL = {"torch.float32": 1e-4, "torch.bfloat16": 2e-2}


@pytest.fixture(scope="module")
def results(tmp_path_factory, testrun_uid):
    """{case: line} from one run of the worker for the whole test run."""

    def run():
        env = dict(os.environ, HELION_CACHE_DIR=str(tmp_path_factory.mktemp("helion_cache")),
                   PYTHONWARNINGS="ignore")
        r = subprocess.run([sys.executable, "-P", WORKER], capture_output=True, text=True, cwd="/", env=env,
                           timeout=600)
        lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-3000:]
        return {line["case"]: line for line in lines}

    return once_per_run(tmp_path_factory, testrun_uid, "helion_results", run)


@pytest.mark.parametrize("case", ["add_f32", "add_bf16", "row_sum_f32", "softmax_f32", "softmax_bf16",
                                  "matmul_f32", "matmul_bf16", "layer_norm_f32"])
def test_helion_kernel_equals_torch(results, case):
    r = results[case]
    assert "error" not in r, r
    assert r["device"] == "tpu:0", r
    assert r["err_cpu"] <= TOL[r["dtype"]] and r["err_xla"] <= TOL[r["dtype"]], r


@pytest.mark.parametrize("case, budget", [("autotune_configs", 60), ("autotune_quick", 60)])
def test_helion_autotune_completes_within_its_budget(results, case, budget):
    r = results[case]
    assert "error" not in r, r
    assert r["err_cpu"] <= 1e-5, r
    assert r["seconds"] < budget, r


def test_a_ragged_edge_the_interpret_lowering_cannot_express_raises_naming_the_kernel(results):
    # Helion copies an overhanging edge block with a dynamically sized DMA,
    # which Pallas' plain interpret lowering cannot trace (docs/kernels.md).
    r = results["add_ragged"]
    assert "error" in r and "_helion_add: JAX could not lower the kernel for the 'cpu' plugin" in r["error"], r
