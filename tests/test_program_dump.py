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


def test_xla_options_reach_the_compile(tmp_path):
    """torch.backends.tpu's settings are in the options XLA compiled each
    program with (XLA writes them next to the program as <module>.debug_options)."""
    env = dict(os.environ, TORCH_TPU_DUMP_DIR=str(tmp_path))
    code = (
        "import torch, torch_tpu\n"
        "x = torch.ones(3, device='tpu'); (x + 1).cpu()\n"
        "torch.backends.tpu.allow_excess_precision = False\n"
        "torch.backends.tpu.xla_optimization_level = 1\n"
        "(x - 1).cpu()\n"
    )
    r = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    options = {}
    for t in glob.glob(str(tmp_path / "*.stablehlo.mlir")):
        text = open(t).read()
        found = glob.glob(os.path.join(t[: -len(".stablehlo.mlir")], "*.debug_options"))
        key = "subtract" if "stablehlo.subtract" in text else "add" if "stablehlo.add" in text else t
        options[key] = open(found[0]).read() if found else ""
    assert "xla_allow_excess_precision: false" in options["subtract"]
    assert "xla_backend_optimization_level: 1" in options["subtract"]
    assert "xla_allow_excess_precision: false" not in options["add"]
