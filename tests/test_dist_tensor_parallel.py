"""DTensor and tensor parallel on tpu_dist, each against the same program on
CPU tensors over gloo: placements and redistribution, ColwiseParallel /
RowwiseParallel / SequenceParallel training (tests/dist_workers/
tensor_parallel.py), and FSDP2 x TP on a (2, 2) mesh (fsdp_tp.py)."""

from dist_launch import run_ok


def test_dtensor_and_tensor_parallel_match_gloo():
    run_ok("tensor_parallel.py", nproc=2)


def test_fsdp2_times_tensor_parallel_2d_mesh():
    run_ok("fsdp_tp.py", nproc=4, timeout=300)
