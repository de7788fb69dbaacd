"""nn.DataParallel on tpu: PyTorch's DataParallel needs CUDA-only C++
scatter/gather (torch._C._scatter), so once it would pick tpu it raises at
construction, naming DistributedDataParallel; one device and two devices
alike (the test session has TORCH_TPU_NUM_DEVICES=2)."""
import pytest
import torch

from torch_tpu.patches import data_parallel as dp


@pytest.mark.parametrize("device_ids", [None, [0], [0, 1]])
def test_data_parallel_raises_at_construction(device_ids):
    assert torch.tpu.device_count() == 2
    module = torch.nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="DistributedDataParallel"):
        torch.nn.DataParallel(module, device_ids=device_ids)
    assert module.weight.device.type == "cpu"  # nothing was moved


def test_subclass_raises_too_and_the_guard_installs_once():
    class Mine(torch.nn.DataParallel):
        pass

    with pytest.raises(RuntimeError, match="cannot run on tpu"):
        Mine(torch.nn.Linear(3, 2).to("tpu"))
    before = torch.nn.DataParallel.__init__
    dp.install()
    assert torch.nn.DataParallel.__init__ is before


def test_the_module_runs_directly_on_one_device():
    module = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    torch.testing.assert_close(module.to("tpu")(x.to("tpu")).cpu(), module.cpu()(x))
