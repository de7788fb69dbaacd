"""FSDP2 (fully_shard) on tpu_dist equals the same FSDP2 run on CPU tensors
over gloo: losses and parameters of a few AdamW steps, with nothing falling
back to the CPU (tests/dist_workers/fsdp.py), in strict and fused eager mode."""

import pytest

from dist_launch import four_ranks, run_ok


@pytest.mark.parametrize("reshard,tie,precision,mode,nproc", [
    ("1", "untied", "fp32", "strict", 2),
    ("0", "tied", "fp32", "fused", 2),
    ("1", "tied", "bf16", "strict", 2),  # MixedPrecisionPolicy: bf16 parameters, fp32 reduce
    four_ranks("1", "untied", "fp32", "strict", 4),
])
def test_fsdp2_matches_gloo(reshard, tie, precision, mode, nproc):
    run_ok("fsdp.py", reshard, tie, precision, nproc=nproc, env={"TORCH_TPU_EAGER_MODE": mode})
