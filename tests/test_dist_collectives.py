"""tpu_dist collectives under torchrun, each against gloo on CPU tensors
(tests/dist_workers/collectives.py), on 2 and 4 ranks."""

import pytest

from dist_launch import run_ok


@pytest.mark.parametrize("nproc", [2, 4])
def test_collectives_match_gloo(nproc):
    run_ok("collectives.py", nproc=nproc, timeout=420)
