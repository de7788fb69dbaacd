"""torch.tpu.amp: the tpu counterparts of torch.cuda.amp's names.

torch.autocast("tpu", dtype=...) and torch.amp.GradScaler("tpu") are the
primary spellings; these exist so that code written against torch.cuda.amp
ports by renaming the module. The op policy (which ops run in the low-precision
dtype and which in float32) is CUDA's; it is registered in csrc/backend/aten/autocast.cpp.
"""
import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast):
    """torch.autocast("tpu", ...). Without a dtype it uses torch.get_autocast_dtype("tpu"),
    float16 by default as on CUDA; bfloat16 needs no GradScaler and is the TPU's native type."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("tpu", ...)."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.amp.custom_fwd for device_type "tpu"."""
    return torch.amp.custom_fwd(fwd, device_type="tpu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """torch.amp.custom_bwd for device_type "tpu"."""
    return torch.amp.custom_bwd(bwd, device_type="tpu")
