"""DistributedDataParallel on tpu under torchrun equals one CPU process
training on the full batch (tests/dist_workers/ddp.py)."""

import pytest

from dist_launch import run_ok


# init_process_group() without a backend is covered by test_dist_groups.py:
# torch 2.13 marks such a group's default backend as gloo (BackendConfig's
# UNDEFINED case in distributed_c10d.py), which DDP's logger then looks up.
@pytest.mark.parametrize("backend,mode", [("tpu_dist", "strict"), ("cpu:gloo,tpu:tpu_dist", "fused")])
def test_ddp_matches_single_process_cpu(backend, mode):
    run_ok("ddp.py", backend, env={"TORCH_TPU_EAGER_MODE": mode})
