"""torch_tpu.api: TorchTPU's older entry point, ``api.tpu_device()``.

Callers written for Google's TorchTPU start the backend with it and use the
device it returns (``x.to(api.tpu_device())``). Also ``torch.tpu.api``.
"""
import torch

from . import _loader


def tpu_device(index=None):
    """Starts the tpu backend (plugin, client, devices) and returns the
    ``torch.device`` of tpu ``index`` (default: the current tpu device).
    Raises RuntimeError when no plugin can run or the index does not exist."""
    _loader.load()
    from . import _C

    count = _C._device_count()  # starts the PJRT client; raises with the plugin's reason
    idx = _C._current_device() if index is None else int(index)
    if not 0 <= idx < count:
        raise ValueError(f"tpu:{idx} does not exist: this process has {count} tpu device(s)")
    return torch.device("tpu", idx)


__all__ = ["tpu_device"]
