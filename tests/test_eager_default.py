"""The library's default eager mode, in fresh processes that do not set
TORCH_TPU_EAGER_MODE (the rest of the suite pins strict, tests/conftest.py):
fused, with the quickstart training the same model as strict eager while
compiling far fewer programs; TORCH_TPU_EAGER_MODE=strict still selects strict."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICKSTART = os.path.join(ROOT, "examples", "quickstart.py")


def env_with(mode=None, cache_dir=None):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_EAGER_MODE"}
    if mode is not None:
        env["TORCH_TPU_EAGER_MODE"] = mode
    if cache_dir is not None:  # an empty persistent cache: every program the run needs compiles
        env["TORCH_TPU_CACHE_DIR"] = str(cache_dir)
    return env


def run(args, mode=None, cache_dir=None):
    proc = subprocess.run([sys.executable, *args], env=env_with(mode, cache_dir), cwd="/", capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


@pytest.mark.parametrize("mode,expected", [(None, "fused"), ("strict", "strict"), ("fused", "fused")])
def test_default_is_fused_and_the_setting_selects(mode, expected):
    out = run(["-c", "import torch, torch_tpu; print(torch_tpu.get_eager_mode())"], mode)
    assert out.strip().splitlines()[-1] == expected


def quickstart(mode, cache_dir):
    out = run([QUICKSTART], mode, cache_dir)
    losses = [float(x) for x in re.findall(r"^step +\d+ +loss ([0-9.e+-]+)$", out, re.M)]
    compiled = int(re.search(r"programs compiled: (\d+)", out).group(1))
    assert "CPU fallbacks: none" in out, out
    return losses, compiled


def test_quickstart_in_the_default_mode_matches_strict_with_fewer_programs(tmp_path):
    default_losses, default_compiled = quickstart(None, tmp_path / "default")
    strict_losses, strict_compiled = quickstart("strict", tmp_path / "strict")
    assert len(default_losses) == len(strict_losses) == 9
    for a, b in zip(default_losses, strict_losses):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), (default_losses, strict_losses)
    # A step is one cluster program from the third on; strict compiles one per op and signature.
    assert default_compiled * 4 <= strict_compiled, (default_compiled, strict_compiled)
