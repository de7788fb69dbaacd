"""torch_tpu._loader: the load step TorchTPU's callers run (Ray, vLLM plugins).

In Google's TorchTPU, ``torch_tpu._loader.load()`` registers the ``tpu``
device with PyTorch (device module, ``Tensor.tpu()``, the ``tpu_dist`` c10d
backend). Here ``import torch_tpu`` already does all of that, so ``load()``
checks that it happened and returns; both are idempotent and neither starts
the PJRT client (so a launcher may still set its topology variables after).
"""
import torch

_DEVICE = "tpu"


def load():
    """Registers the ``tpu`` device, its ``torch.tpu`` module and the
    ``tpu_dist`` c10d backend (idempotent). Raises ImportError when the
    extension cannot be loaded."""
    import torch_tpu  # noqa: F401  (the import registers everything)

    from . import distributed

    distributed.register()
    if torch._C._get_privateuse1_backend_name() != _DEVICE or not hasattr(torch, _DEVICE):
        raise ImportError("torch_tpu: the tpu device did not register with PyTorch")


def _init_device(name=_DEVICE):
    """TorchTPU's lower-level form of load() for one device name; only
    ``"tpu"`` exists here."""
    if name != _DEVICE:
        raise ValueError(f"torch_tpu._loader._init_device: only the device {_DEVICE!r} exists, got {name!r}")
    load()


__all__ = ["load"]
