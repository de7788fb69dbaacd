"""torch.backends.tpu: compiler settings of tpu programs (TorchTPU's name).

``torch.backends.tpu.allow_excess_precision`` (bool, default True, XLA's own
default) is XLA's ``xla_allow_excess_precision`` for every program compiled
from then on. True lets XLA skip a rounding to a narrower float type that the
program states when it can keep the wider value (a bfloat16 matmul result
used in float32 may keep float32 bits within one program: TorchTPU shows this
on TPUs, XLA's GPU compiler removes such round trips); False makes every
rounding happen where the program says, as PyTorch's CPU kernels do. XLA's
CPU plugin keeps the roundings of this project's programs either way. One op
per program (strict eager) stores its result in its dtype whatever the
setting. Each setting has its own programs in the caches (in memory and on
disk). Pending fused eager work runs before the setting changes.

``torch.backends.tpu.xla_optimization_level`` (None: the plugin's default, or
0..3) is XLA's ``xla_backend_optimization_level`` for programs compiled from
then on (lower levels compile faster and may run slower); each level has its
own programs in the caches.

Hugging Face's ``kernels`` detects a TPU by ``hasattr(torch.backends, "tpu")``.
"""
import sys
import types

import torch

from . import _C


class _TpuBackendModule(types.ModuleType):
    @property
    def allow_excess_precision(self):
        return _C._allow_excess_precision()

    @allow_excess_precision.setter
    def allow_excess_precision(self, value):
        if not isinstance(value, bool):
            raise TypeError(f"torch.backends.tpu.allow_excess_precision must be a bool, got {type(value).__name__}")
        if value != _C._allow_excess_precision():
            _C._fused_flush("python")  # recorded work compiles with the setting it was recorded under
            _C._set_allow_excess_precision(value)

    @property
    def xla_optimization_level(self):
        level = _C._xla_optimization_level()
        return None if level < 0 else level

    @xla_optimization_level.setter
    def xla_optimization_level(self, value):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"torch.backends.tpu.xla_optimization_level must be None or an int, got {value!r}")
        level = -1 if value is None else value
        if level != _C._xla_optimization_level():
            _C._fused_flush("python")
            _C._set_xla_optimization_level(level)  # ValueError outside 0..3

    def is_available(self):
        """True when a PJRT plugin runs the tpu device (torch.tpu.is_available())."""
        return torch.tpu.is_available()


def install():
    """Makes this module ``torch.backends.tpu`` (idempotent)."""
    module = sys.modules[__name__]
    if not isinstance(module, _TpuBackendModule):
        module.__class__ = _TpuBackendModule
    sys.modules.setdefault("torch.backends.tpu", module)
    torch.backends.tpu = module
