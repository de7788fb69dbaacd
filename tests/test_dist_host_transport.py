"""The tpu_dist host transport on large messages (tests/dist_workers/
host_transport.py): pooled host staging and, on the CPU plugin, device
buffers that alias the host result, and the copying path that
TORCH_TPU_DIST_ZERO_COPY=0 forces; both must give gloo's results."""

import pytest

from dist_launch import run_ok


@pytest.mark.parametrize("zero_copy", ["1", "0"])
def test_host_transport_matches_gloo(zero_copy):
    run_ok("host_transport.py", nproc=2, timeout=300, env={"TORCH_TPU_DIST_ZERO_COPY": zero_copy})
