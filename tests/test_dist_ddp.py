"""DistributedDataParallel on tpu under torchrun equals one CPU process
training on the full batch (tests/dist_workers/ddp.py)."""

import pytest

from dist_launch import four_ranks, run_ok


# init_process_group() with neither backend nor device: c10d picks tpu_dist
# for the tpu accelerator (test_dist_groups.py), but torch 2.13 and 2.14 then
# mark the group's default backend as gloo (_new_process_group_helper, the
# UNDEFINED case: NCCL if present, else GLOO), which only a CUDA/NCCL group
# has registered; DDP's logger asks for it and raises "Could not find backend
# type 1". pytorch/pytorch#189193 fixes it upstream. With a device_id,
# c10d resolves the backend from the device (default_device_backend_map).
@pytest.mark.parametrize("backend,mode,nproc", [("tpu_dist", "strict", 2), ("cpu:gloo,tpu:tpu_dist", "fused", 2),
                                                ("device_id", "strict", 2), four_ranks("tpu_dist", "strict", 4)])
def test_ddp_matches_single_process_cpu(backend, mode, nproc):
    run_ok("ddp.py", backend, nproc=nproc, env={"TORCH_TPU_EAGER_MODE": mode})
