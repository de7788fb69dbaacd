"""torch.distributed.checkpoint on tpu: an FSDP2 model and AdamW state saved
at step N and loaded into a fresh model continue exactly as the
uninterrupted run (tests/dist_workers/checkpoint.py)."""

import pytest

from dist_launch import four_ranks, run_ok


@pytest.mark.parametrize("nproc", [2, four_ranks(4)])
def test_dcp_save_load_resume_fsdp2(tmp_path, nproc):
    run_ok("checkpoint.py", str(tmp_path / "ckpt"), nproc=nproc)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.suffix == ".distcp") == [
        f"__{r}_0.distcp" for r in range(nproc)]
