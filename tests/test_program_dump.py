"""TORCH_TPU_DUMP_DIR: every program's StableHLO, and XLA's compiled form of it."""
import glob
import os
import subprocess
import sys


def test_dump_dir_holds_stablehlo_and_compiled_program(tmp_path):
    env = dict(os.environ, TORCH_TPU_DUMP_DIR=str(tmp_path / "dump"))
    code = "import torch, torch_tpu; print(torch.arange(3.0, device='tpu').mul(5).tolist())"
    r = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0.0, 5.0, 10.0]"
    texts = glob.glob(str(tmp_path / "dump" / "*.stablehlo.mlir"))
    assert any("stablehlo.multiply" in open(t).read() for t in texts)
    for t in texts:  # each program's folder holds XLA's HLO after optimization
        folder = t[: -len(".stablehlo.mlir")]
        assert glob.glob(os.path.join(folder, "*after_optimizations*")), os.listdir(os.path.dirname(t))
