"""init_process_group() without a backend, new_group and DeviceMesh
dimensions on tpu_dist (tests/dist_workers/groups.py)."""

import pytest

from dist_launch import run_ok


@pytest.mark.parametrize("nproc", [2, 4])
def test_default_backend_groups_and_device_mesh(nproc):
    run_ok("groups.py", nproc=nproc, timeout=300)
