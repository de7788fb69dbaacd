import os

# Op tests must prove ops run natively: a CPU fallback is an error.
os.environ.setdefault("TORCH_TPU_FALLBACK", "error")
os.environ.setdefault("TORCH_TPU_NUM_DEVICES", "2")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_tpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _no_fallback():
    """Every test starts with fallback counters cleared; fallbacks raise."""
    torch_tpu.reset_fallback_ops()
    torch_tpu.set_fallback_mode(os.environ.get("TORCH_TPU_FALLBACK", "error"))
    yield


@pytest.fixture
def allow_fallback():
    torch_tpu.set_fallback_mode("silent")
    yield
    torch_tpu.set_fallback_mode("error")
