"""Collectives inside torch.compile(backend="tpu") graphs on tpu_dist, under
torchrun with 2 ranks (tests/dist_workers/compiled.py): compiled funcol
collectives against gloo on CPU tensors, a compiled tensor-parallel step, compiled
DDP and FSDP2 with compiled blocks against one CPU process, and a collective in
fused eager mode. No graph runs op by op, nothing falls back to the CPU."""

import pytest

from dist_launch import four_ranks, run_ok


@pytest.mark.parametrize("nproc", [2, four_ranks(4)])
def test_collectives_in_compiled_graphs(nproc):
    run_ok("compiled.py", nproc=nproc, timeout=240, env={"TORCH_TPU_FALLBACK": "error"})
