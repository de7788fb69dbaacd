"""TorchTitan 0.3.0, unchanged, trains its Qwen3 MoE debug model (64 experts, top 8)
on tpu with FSDP2 x expert parallel 2 over 2 ranks (examples/torchtitan,
`--config qwen3_moe_debug_sdpa`: SDPA attention and the fixed-capacity token
dispatcher of capacity_dispatcher.py; its first 2 layers in the default tier, all 8 in the
heavy one). Needs `bash scripts/setup.sh --titan`.

The reference is TorchTitan's own trainer on the CPU with gloo, FSDP2 over 2 ranks
and EP 1 (expert parallelism does not change the math), from the same seed
checkpoint (DCP, written by a 1-rank tpu run): the logged global losses must agree
to float32 reduction-order noise (TorchTitan logs 5 decimals; grouped matmuls sum
weight gradients over rows in another order under EP). After warm-up a step builds
no XLA program on any rank: every shape the dispatcher makes depends on the batch
only."""
import math
import sys
from pathlib import Path

import pytest

from torch_tpu import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_torchtitan import _titan_ready, make_seed_checkpoint, run_titan_in_venv  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not _titan_ready(),
                       reason="TorchTitan is not set up: run `bash scripts/setup.sh --titan` (.venv-2.14 with torchtitan 0.3.0)"),
]

STEPS = 4
CONFIG = "qwen3_moe_debug_sdpa"  # 8 layers: the heavy tier
# The default tier's model: the same blocks, 2 layers. A tpu rank of the 8-layer
# model peaks near 11 GB here, so two ranks outgrow a 24 GiB machine beside
# other tests.
SHORT_CONFIG = "qwen3_moe_debug_sdpa_2_layers"


def _run(workdir, nproc, extra, steps=STEPS, device="tpu", config=CONFIG):
    return run_titan_in_venv(workdir, nproc, extra, steps, timeout=1500, seq_len=32, batch=2, device=device,
                             config=config)


@pytest.fixture(scope="module")
def seed_checkpoint(tmp_path_factory):
    """config -> the arguments that start a run from its seed checkpoint (made once)."""
    made = {}

    def for_config(config):
        if config not in made:
            made[config] = make_seed_checkpoint(lambda *a: _run(*a, config=config), tmp_path_factory.mktemp("moe_seed"))
        return made[config]
    return for_config


FSDP2 = ["--parallelism.data_parallel_shard_degree=2"]
FSDP2_EP2 = FSDP2 + ["--parallelism.expert_parallel_degree=2"]


# TorchTitan's GroupedExperts compute in bfloat16 (x and the weights cast
# before torch._grouped_mm), so two runs whose float32 values differ in the
# last bit can round an expert input differently: measured up to 2.1e-4 apart
# at loss ~7.4 over 4 steps (2.9e-5 relative; a CI run, step 3), where llama3
# agrees to 2e-5.
MOE_LOSS_TOL = 4e-4


def _assert_same_losses(got, want, abs_tol, steps=STEPS):
    assert sorted(got) == list(range(1, steps + 1)), got
    assert all(math.isfinite(v) for v in got.values()), got
    assert got[steps] < got[1], got  # it learns
    for step in got:
        assert math.isclose(got[step], want[step], rel_tol=0, abs_tol=abs_tol), (step, got, want)


def test_moe_fsdp2_x_ep2_on_tpu_equals_cpu_and_builds_no_program_after_warmup(tmp_path, seed_checkpoint):
    seed = seed_checkpoint(SHORT_CONFIG)
    cpu, cpu_built = _run(tmp_path / "cpu", 2, seed + FSDP2, device="cpu", config=SHORT_CONFIG)
    assert cpu_built == {}  # torch_tpu is not loaded in the reference
    tpu, built = _run(tmp_path / "tpu", 2, seed + FSDP2_EP2, config=SHORT_CONFIG)
    _assert_same_losses(tpu, cpu, abs_tol=MOE_LOSS_TOL)
    assert sorted(built) == list(range(1, STEPS + 1)), built
    assert built[1] > 0, built  # the counter sees the warm-up builds
    assert all(built[s] == 0 for s in range(3, STEPS + 1)), built


@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (20 steps, 4 ranks)")
@pytest.mark.parametrize("nproc,extra", [
    (1, ["--parallelism.data_parallel_shard_degree=1"]),
    (2, FSDP2),
    (2, FSDP2_EP2),
    (2, FSDP2_EP2 + ["--compile.enable", "--compile.backend=tpu"]),
    (4, ["--parallelism.data_parallel_shard_degree=4", "--parallelism.expert_parallel_degree=4"]),
], ids=["one_rank", "fsdp2", "fsdp2_ep2", "fsdp2_ep2_compiled", "fsdp4_ep4"])
def test_moe_20_steps_on_tpu_equal_cpu(tmp_path, seed_checkpoint, nproc, extra):
    """20 steps against the CPU with gloo at the same data-parallel size (same batches), EP 1."""
    seed = seed_checkpoint(CONFIG)
    cpu, _ = _run(tmp_path / "cpu", nproc, seed + [f"--parallelism.data_parallel_shard_degree={nproc}"],
                  steps=20, device="cpu")
    tpu, built = _run(tmp_path / "tpu", nproc, seed + extra, steps=20)
    _assert_same_losses(tpu, cpu, abs_tol=1.5 * MOE_LOSS_TOL, steps=20)
    assert all(built[s] == 0 for s in range(3, 21)), built
