"""Small tpu_dist collectives whose data rides in the agreement exchange,
and the sizes around its capacity, equal gloo's results
(tests/dist_workers/inline_collectives.py); with TORCH_TPU_DIST_CHECK=0 the
same collectives go through gloo alone."""

import pytest

from dist_launch import run_ok


@pytest.mark.parametrize("nproc,check", [(2, "1"), (3, "1"), (2, "0")])
def test_inline_collectives_match_gloo(nproc, check):
    run_ok("inline_collectives.py", nproc=nproc, timeout=420, env={"TORCH_TPU_DIST_CHECK": check})
