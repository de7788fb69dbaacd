"""torch.distributed.checkpoint on tpu: an FSDP2 model and AdamW state saved
at step N and loaded into a fresh model continue exactly as the
uninterrupted run (tests/dist_workers/checkpoint.py)."""

from dist_launch import run_ok


def test_dcp_save_load_resume_fsdp2(tmp_path):
    run_ok("checkpoint.py", str(tmp_path / "ckpt"))
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.suffix == ".distcp") == [
        "__0_0.distcp", "__1_0.distcp"]
