"""Runs the C++ tests of the layers below PyTorch: the PJRT runtime and the
StableHLO builder (built by CMake next to the extension)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_tpu import settings

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / settings.get("TORCH_TPU_BUILD_DIR")  # an absolute path stays as it is


def site_packages():
    return os.pathsep.join(p for p in sys.path if p.endswith("site-packages"))


@pytest.mark.parametrize("binary", ["tt_runtime_test", "tt_hlo_test", "tt_compile_cache_test"])
def test_cpp_binary(binary):
    exe = BUILD / binary
    if not exe.exists():
        exe = BUILD / "csrc" / "runtime" / binary
    assert exe.exists(), f"{binary} was not built in {BUILD} (set TORCH_TPU_BUILD_DIR)"
    env = dict(os.environ, TORCH_TPU_PLUGIN_SEARCH_PATH=site_packages(), TORCH_TPU_NUM_DEVICES="2")
    out = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    print(out.stdout[-3000:])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " 0 failed" in out.stdout
