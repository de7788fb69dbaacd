"""FSDP2 (fully_shard) on tpu_dist equals the same FSDP2 run on CPU tensors
over gloo: losses and parameters of a few AdamW steps, with nothing falling
back to the CPU (tests/dist_workers/fsdp.py), in strict and fused eager mode."""

import pytest

from dist_launch import run_ok


@pytest.mark.parametrize("reshard,tie,precision,mode", [
    ("1", "untied", "fp32", "strict"),
    ("0", "tied", "fp32", "fused"),
    ("1", "tied", "bf16", "strict"),  # MixedPrecisionPolicy: bf16 parameters, fp32 reduce
])
def test_fsdp2_matches_gloo(reshard, tie, precision, mode):
    run_ok("fsdp.py", reshard, tie, precision, env={"TORCH_TPU_EAGER_MODE": mode})
