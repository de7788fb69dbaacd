"""DistributedDataParallel on tpu under torchrun equals one CPU process
training on the full batch (tests/dist_workers/ddp.py)."""

import pytest

from dist_launch import run_ok


@pytest.mark.parametrize("backend", ["tpu_dist", ""], ids=["tpu_dist", "default_backend"])
def test_ddp_matches_single_process_cpu(backend):
    run_ok("ddp.py", backend)
