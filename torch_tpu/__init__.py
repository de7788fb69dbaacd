"""torch_tpu: PyTorch on TPUs (and any XLA device) through PJRT.

    import torch, torch_tpu
    x = torch.randn(4, 4, device="tpu")

Every op runs as an XLA program on the PJRT device; ops without a lowering
rule fall back to the CPU visibly (see fallback_ops()).
"""
import os
import sys

import torch

# XLA's plugins log an INFO line per client to stderr; keep warnings and errors.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from . import _plugin_search

_plugin_search.configure()

from . import _C  # noqa: E402

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import tpu as _tpu_module  # noqa: E402

torch._register_device_module("tpu", _tpu_module)
sys.modules.setdefault("torch.tpu.amp", _tpu_module.amp)  # `import torch.tpu.amp` / `from torch.tpu.amp import ...`
if not hasattr(torch.Tensor, "is_tpu"):
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
_C._register_ops()

from . import _safetensors_hook  # noqa: E402

_safetensors_hook.install()

__version__ = "0.1.0"


def cache_info():
    """Program cache counters: hits, misses, compiles, entries, compile_seconds."""
    return _C._cache_info()


def cache_clear():
    """Drops every compiled program and resets the counters."""
    _C._cache_clear()


def fallback_ops():
    """{op name: calls} for ops that ran on the CPU because no rule lowered them."""
    return dict(_C._fallback_ops())


def reset_fallback_ops():
    _C._reset_fallback_ops()


def set_fallback_mode(mode):
    """'warn' (default: warn once per op), 'error' (raise) or 'silent'.

    The environment variable TORCH_TPU_FALLBACK sets the initial mode."""
    _C._set_fallback_mode(mode)


def runtime_info():
    """Which PJRT plugin runs the tpu device: file, why, API versions, devices."""
    return dict(_C._runtime_info())


def lowered_ops():
    """Names of the ATen overloads with a native lowering rule."""
    return list(_C._rule_names())
