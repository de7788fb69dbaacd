"""Errors, not crashes: each mistake is a Python exception that says what to do."""
import os
import subprocess
import sys

import pytest
import torch
import torch_tpu


def run_py(code, **env):
    e = dict(os.environ, **env)
    # Outside the repo, so that the installed (or PYTHONPATH) package is imported.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120,
                          cwd="/")


def test_missing_plugin_file_names_the_path():
    out = run_py("import torch, torch_tpu; torch.ones(1, device='tpu')",
                 TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert out.returncode != 0
    assert "/nonexistent/plugin.so" in out.stderr
    assert "Traceback" in out.stderr  # a Python exception, not an abort


def test_not_a_plugin_is_refused():
    out = run_py("import torch, torch_tpu; print(torch.tpu.is_available())",
                 TORCH_TPU_PJRT_PLUGIN=torch.__file__)
    assert out.returncode == 0, out.stderr
    assert "False" in out.stdout


def test_shape_mismatch_same_type_as_cpu():
    # PyTorch's own checks run (its meta kernels), so the type is the CPU's.
    with pytest.raises(RuntimeError) as cpu:
        torch.ones(2, 3) + torch.ones(4)
    with pytest.raises(type(cpu.value), match="4"):
        torch.ones(2, 3, device="tpu") + torch.ones(4, device="tpu")


def test_inplace_cast_error_same_as_cpu():
    with pytest.raises(RuntimeError, match="can't be cast|not possible"):
        torch.ones(2, dtype=torch.int64, device="tpu").add_(1.5 * torch.ones(2, device="tpu"))


def test_out_of_memory_is_torch_oom():
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device="tpu")
    # the process is still healthy
    assert (torch.ones(2, device="tpu") + 1).sum().item() == 4


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="dtype"):
        torch.empty(2, dtype=torch.complex32, device="tpu")


def test_fallback_error_mode_names_the_op():
    torch_tpu.set_fallback_mode("error")
    with pytest.raises(NotImplementedError, match="aten::"):
        torch.ones(3, device="tpu").hash_tensor()  # an op with no rule


def test_fallback_is_counted_and_correct(allow_fallback):
    x = torch.randn(3, 3)
    y = x.to("tpu").hash_tensor()  # an op with no rule
    torch.testing.assert_close(y.cpu(), x.hash_tensor())
    assert y.device.type == "tpu"
    assert any("hash_tensor" in k for k in torch_tpu.fallback_ops())
