"""torch.tpu as a drop-in for torch.cuda, and the device's identity."""
import subprocess
import sys

import pytest
import torch
import torch_tpu


def test_available_and_count():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 2  # TORCH_TPU_NUM_DEVICES=2 in conftest


def test_tensor_lives_on_tpu():
    x = torch.ones(3, device="tpu")
    assert x.device.type == "tpu" and x.is_tpu
    assert torch.ones(2).tpu().device == torch.device("tpu", 0)
    assert torch.ones(2).to("tpu:1").device == torch.device("tpu", 1)
    assert torch.allclose(x.cpu(), torch.ones(3))


def test_data_lives_in_a_pjrt_buffer():
    before = torch.tpu.memory_allocated()
    x = torch.arange(1024, dtype=torch.float32).to("tpu")
    assert torch.tpu.memory_allocated() - before >= 4096
    del x
    assert torch.tpu.memory_allocated() == before


def test_current_device_and_context():
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        assert torch.empty(2, device="tpu").device.index == 1
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(1)
    try:
        assert torch.zeros(1, device="tpu").device.index == 1
    finally:
        torch.tpu.set_device(0)


def test_bad_device_index():
    with pytest.raises((ValueError, IndexError, RuntimeError)):
        torch.tpu.set_device(7)
    with pytest.raises((IndexError, RuntimeError)):
        torch.ones(2, device="tpu:9")


def test_synchronize_and_names():
    x = torch.ones(100, device="tpu") * 3
    torch.tpu.synchronize()
    name = torch.tpu.get_device_name()
    assert "cpu" in name.lower() or "tpu" in name.lower() or "gpu" in name.lower()
    props = torch.tpu.get_device_properties(0)
    assert props.total_memory > 0 and props.plugin_path.endswith(".so")
    info = torch_tpu.runtime_info()
    assert info["plugin_path"] == props.plugin_path
    assert info["pjrt_api_version"].startswith("0.")
    assert x.sum().item() == 300


def test_memory_stats_peak_and_reset():
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    y = torch.empty(1 << 20, dtype=torch.uint8, device="tpu").fill_(1)
    assert torch.tpu.max_memory_allocated() >= base + (1 << 20)
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    del y
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    torch.tpu.empty_cache()


def test_autoload_on_plain_import_torch():
    code = "import torch; x = torch.ones(2, device='tpu'); print(x.device, (x + 1).cpu().tolist())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    assert "tpu:0 [2.0, 2.0]" in out.stdout
