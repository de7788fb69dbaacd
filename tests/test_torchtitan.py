"""TorchTitan 0.3.0, unchanged, trains its llama3 debug model on tpu with FSDP2
over 2 ranks (examples/torchtitan). Needs `bash scripts/setup.sh --titan`.

The reference is TorchTitan's own trainer on the CPU with gloo
(examples/torchtitan/cpu_train.py: TorchTitan's device set to cpu, torch_tpu not
loaded), FSDP2 over 2 ranks: both runs start from one seed checkpoint (DCP,
written by a 1-rank tpu run), read the same batches, and their logged global
losses must agree. Tolerance: TorchTitan logs the loss with 5 decimals, so two
runs that agree to float32 rounding (XLA's CPU kernels against ATen's, ~1e-6
relative) can still print one unit of 1e-5 apart; 2e-5 absolute over the first
steps (measured: equal to all 5 decimals for 19 of 20 steps, 1e-5 at step 20).
A DCP checkpoint saved at step 10 and resumed gives the uninterrupted run's
steps 11-20."""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_tpu import settings

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-2.14" / "bin" / "python"


def _load_titan_run():
    """examples/torchtitan/run.py (standard library only at import), by path: its
    seed-checkpoint flags, without a module named `run` on sys.path."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("titan_run", ROOT / "examples" / "torchtitan" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


titan_run = _load_titan_run()


def _titan_ready():
    if not VENV.exists():
        return False
    probe = subprocess.run([str(VENV), "-c", "import importlib.util as u, sys; "
                            "sys.exit(not (u.find_spec('torchtitan') and u.find_spec('torch_tpu')))"],
                           cwd="/", capture_output=True, timeout=120)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.skipif(not _titan_ready(),
                       reason="TorchTitan is not set up: run `bash scripts/setup.sh --titan` (.venv-2.14 with torchtitan 0.3.0)"),
]

STEPS = 4

# The test session's TORCH_TPU_NUM_DEVICES would fix every rank's device count;
# under torchrun each rank sees LOCAL_WORLD_SIZE CPU-plugin devices instead.
_RUNNER = """
import json, os, sys
os.environ.pop("TORCH_TPU_NUM_DEVICES", None)
sys.path.insert(0, {example!r})
from run import run_titan, programs_built
losses, speed, log = run_titan({workdir!r}, {nproc}, {steps}, {extra!r}, echo=False, **{titan!r})
print("RESULT=" + json.dumps({{"losses": losses, "built": programs_built(log)}}))
"""


def run_titan_in_venv(workdir, nproc, extra, steps, **titan):
    """examples/torchtitan's run_titan in .venv-2.14 -> ({step: loss}, {step: programs built}).
    `titan`: run_titan's keyword arguments (timeout, seq_len, batch, device, config); the
    process gets 300 s more than TorchTitan's timeout."""
    code = _RUNNER.format(example=str(ROOT / "examples" / "torchtitan"), workdir=str(workdir), nproc=nproc,
                          steps=steps, extra=list(extra), titan=titan)
    r = subprocess.run([str(VENV), "-c", code], cwd="/", capture_output=True, text=True,
                       timeout=titan["timeout"] + 300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT=")][-1]
    out = json.loads(line[len("RESULT="):])
    return ({int(k): v for k, v in out["losses"].items()}, {int(k): v for k, v in out["built"].items()})


def _run(workdir, nproc, extra, steps=STEPS, device="tpu"):
    losses, _ = run_titan_in_venv(workdir, nproc, extra, steps, timeout=900, seq_len=64, batch=2, device=device)
    return losses


def make_seed_checkpoint(run, folder):
    """TorchTitan's step-0 DCP checkpoint, written by a 1-rank run(folder, nproc, extra)
    -> the arguments that start a run from it (examples/torchtitan/run.py)."""
    run(folder, 1, titan_run.SEED_FLAGS)
    return titan_run.seed_start_flags(folder)


@pytest.fixture(scope="module")
def seed_checkpoint(tmp_path_factory):
    """TorchTitan's step-0 DCP checkpoint of the debug model, from a 1-rank run."""
    return make_seed_checkpoint(_run, tmp_path_factory.mktemp("seed"))


FSDP2 = ["--parallelism.data_parallel_shard_degree=2"]
CPU_TOL = 2e-5  # two units of the 5th logged decimal (module docstring)


@pytest.fixture(scope="module")
def fsdp2_tpu(tmp_path_factory, seed_checkpoint):
    """Losses of the tpu FSDP2 run over 2 ranks, shared by the tests that compare with it."""
    return _run(tmp_path_factory.mktemp("fsdp2_tpu"), 2, seed_checkpoint + FSDP2)


def _assert_same_losses(got, want, abs_tol=1e-4, rel_tol=1e-4, steps=STEPS):
    assert sorted(got) == list(range(1, steps + 1)), got
    assert all(math.isfinite(v) for v in got.values()), got
    assert got[steps] < got[1], got  # it learns
    for step in got:
        assert math.isclose(got[step], want[step], rel_tol=rel_tol, abs_tol=abs_tol), (step, got, want)


def test_fsdp2_on_tpu_equals_torchtitan_on_cpu_with_gloo(tmp_path, seed_checkpoint, fsdp2_tpu):
    cpu = _run(tmp_path / "cpu", 2, seed_checkpoint + FSDP2, device="cpu")
    _assert_same_losses(fsdp2_tpu, cpu, abs_tol=CPU_TOL, rel_tol=0)


@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (20 steps)")
def test_20_steps_eager_and_compiled_on_tpu_equal_cpu_with_gloo(tmp_path, seed_checkpoint):
    """20 steps: tpu eager and tpu compiled (`--compile.backend tpu`), both FSDP2
    over 2 ranks, against TorchTitan on the CPU with gloo. Adam's updates carry
    rounding differences forward, so 20 steps get 5e-5 (measured 1e-5)."""
    cpu = _run(tmp_path / "cpu", 2, seed_checkpoint + FSDP2, steps=20, device="cpu")
    eager = _run(tmp_path / "eager", 2, seed_checkpoint + FSDP2, steps=20)
    _assert_same_losses(eager, cpu, abs_tol=5e-5, rel_tol=0, steps=20)
    compiled = _run(tmp_path / "compiled", 2, seed_checkpoint + FSDP2 + ["--compile.enable", "--compile.backend=tpu"],
                    steps=20)
    _assert_same_losses(compiled, cpu, abs_tol=5e-5, rel_tol=0, steps=20)


@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (2 or 4 ranks)")
@pytest.mark.parametrize("nproc,parallelism", [
    (2, ["--parallelism.data_parallel_shard_degree=1", "--parallelism.data_parallel_replicate_degree=2"]),
    (4, ["--parallelism.data_parallel_shard_degree=2", "--parallelism.tensor_parallel_degree=2"]),
], ids=["replicated", "fsdp2_x_tensor_parallel_4_ranks"])
def test_fsdp2_on_tpu_equals(tmp_path, seed_checkpoint, fsdp2_tpu, nproc, parallelism):
    other = _run(tmp_path / "other", nproc, seed_checkpoint + parallelism)
    _assert_same_losses(other, fsdp2_tpu)


# Heavy tier: tensor parallel over tpu_dist is checked in the default tier by
# tests/test_dist_tensor_parallel.py; TorchTitan's smoke is the FSDP2 test above.
@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (2 torchruns, ~60 s)")
def test_tensor_parallel_2_equals_one_rank(tmp_path, seed_checkpoint):
    one = _run(tmp_path / "one", 1, seed_checkpoint + ["--parallelism.data_parallel_shard_degree=1"])
    tp = _run(tmp_path / "tp", 2, seed_checkpoint + ["--parallelism.data_parallel_shard_degree=1",
                                                     "--parallelism.tensor_parallel_degree=2"])
    _assert_same_losses(tp, one)


# Heavy tier: DCP save and resume on tpu is checked in the default tier by
# tests/test_dist_checkpoint.py.
@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (2 torchruns of 20 steps, ~55 s)")
def test_dcp_checkpoint_at_step_10_resumes_exactly(tmp_path):
    ckpt = ["--checkpoint.enable", "--checkpoint.interval=10"]
    whole = _run(tmp_path / "whole", 2, ckpt, steps=20)
    # A fresh run folder holding only the step-10 checkpoint: TorchTitan resumes from it.
    shutil.copytree(tmp_path / "whole" / "outputs" / "checkpoint" / "step-10",
                    tmp_path / "resumed" / "outputs" / "checkpoint" / "step-10")
    resumed = _run(tmp_path / "resumed", 2, ckpt, steps=20)
    assert sorted(resumed) == list(range(11, 21)), resumed
    for step in resumed:
        assert math.isclose(resumed[step], whole[step], rel_tol=1e-5, abs_tol=1e-5), (step, resumed, whole)
