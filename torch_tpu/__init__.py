"""torch_tpu: PyTorch on TPUs (and any XLA device) through PJRT.

    import torch, torch_tpu
    x = torch.randn(4, 4, device="tpu")

Every op runs as an XLA program on the PJRT device; ops without a lowering
rule fall back to the CPU visibly (see fallback_ops()).
"""
import os
import sys

import torch

# Every change to PyTorch's or another library's behaviour is a patch in
# torch_tpu/patches (listed by torch_tpu.patches()); XLA's log level is set
# before the extension loads a plugin.
from .patches import xla_log_level as _xla_log_level

# Every TORCH_TPU_* variable is declared in settings.def; a bad value stops
# here, naming the variable, before the extension reads any of them.
from . import settings  # noqa: E402

settings.validate()
_xla_log_level.install()

from . import _plugin_search  # noqa: E402

_plugin_search.configure()

try:
    from . import _C  # noqa: E402
except ImportError as e:
    if not any(n.startswith("_C.") for n in os.listdir(os.path.dirname(os.path.abspath(__file__)))):
        # `python -m ...` run in the repository root puts the source folder,
        # which has no built extension, ahead of the installed package.
        raise ImportError(
            f"torch_tpu was imported from its source folder {os.path.dirname(os.path.abspath(__file__))}, which has "
            "no built extension: run from another folder, or with `python -P -m ...` (Python keeps the current "
            "folder off the import path), so that the installed torch_tpu is the one imported") from e
    raise

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import tpu as _tpu_module  # noqa: E402

torch._register_device_module("tpu", _tpu_module)
sys.modules.setdefault("torch.tpu.amp", _tpu_module.amp)  # `import torch.tpu.amp` / `from torch.tpu.amp import ...`
if not hasattr(torch.Tensor, "is_tpu"):
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
_C._register_ops()

from . import _process_guard  # noqa: E402

_process_guard.install()

from . import _autograd_exit  # noqa: E402

_autograd_exit.install()

from . import patches  # noqa: E402

patches.install_at_import()

from ._stats import stats  # noqa: E402,F401
from ._eager_mode import eager_mode, fused_stats, get_eager_mode, reset_fused_stats, set_eager_mode  # noqa: E402,F401

from . import _eager_decompositions  # noqa: E402
from ._eager_decompositions import decomposed_ops, reset_decomposed_ops  # noqa: E402,F401

_eager_decompositions.install()

# c10d's backend for device tpu: "tpu_dist" (torch_tpu/distributed).
from . import distributed as _distributed  # noqa: E402

_distributed.register()
_tpu_module.distributed = _distributed  # torch.tpu.distributed.set_tpu_launch_env, as in TorchTPU
sys.modules.setdefault("torch.tpu.distributed", _distributed)
# `python -m torch.tpu.distributed.environment` finds environment.py through
# this package's path (a sys.modules alias of it would not run under -m).

# TorchTPU's other names: torch.backends.tpu and torch.tpu.api. (accelerate's
# default device is a patch: torch_tpu/patches/accelerate_device.py.)
from . import backends_tpu as _backends_tpu  # noqa: E402

_backends_tpu.install()
from . import api  # noqa: E402

_tpu_module.api = api
sys.modules.setdefault("torch.tpu.api", api)

# The attention kernel's loader (torch_tpu/kernels): JAX is imported only
# when SDPA first chooses a lowering on a TPU plugin.
from . import kernels as _kernels  # noqa: E402,F401

__version__ = "0.1.0"

import sys as _sys  # noqa: E402

# An installed torch_tpu registers backend="tpu" through its
# torch_dynamo_backends entry point; a source checkout on sys.path has none,
# so register now if Dynamo is already loaded (else torch_tpu.compiler.register()).
if "torch._dynamo" in _sys.modules:
    from .compiler import register as _register_compiler

    _register_compiler()


def cache_info():
    """The program cache's counters (torch_tpu.stats("programs")) and the
    persistent compile cache's, prefixed disk_ (torch_tpu.stats
    ("persistent_cache")): disk_hits, disk_misses, disk_rejected,
    disk_writes, disk_evictions, disk_bytes, disk_entries,
    disk_load_seconds, disk_store_seconds. torch_tpu.stats documents each."""
    info = stats("programs")
    disk = stats("persistent_cache")
    for key in ("hits", "misses", "rejected", "writes", "evictions", "bytes", "entries", "load_seconds",
                "store_seconds"):
        info["disk_" + key] = disk[key]
    return info


def cache_clear():
    """Drops every compiled program in memory and resets the in-memory
    counters. The persistent cache on disk is left alone (delete the folder
    persistent_cache_dir() names to empty it)."""
    _C._cache_clear()


def persistent_cache_dir():
    """The folder of the persistent compile cache, or None when it is off.

    Chosen at startup: TORCH_TPU_CACHE_DIR, else $XDG_CACHE_HOME/torch_tpu,
    else ~/.cache/torch_tpu; TORCH_TPU_CACHE=0 turns it off and
    TORCH_TPU_CACHE_MAX_BYTES caps its size (default 1 GiB, least recently
    used entries evicted)."""
    return _C._persistent_cache_dir()


def shared_cache_info():
    """The second tier of the persistent compile cache, at the folder
    TORCH_TPU_SHARED_CACHE_DIR names (one that several hosts share), or None
    when it is off: its folder, this process's hits, misses, rejected
    (corrupt or mismatched entries, replaced), writes and write_errors, and
    the folder's bytes and entries. A local miss reads through to it (an
    entry found is copied into the local cache); a compiled program is
    written to both. No size cap is applied to it. torch_tpu.stats("shared_cache")."""
    return stats("shared_cache")


def fallback_ops():
    """{op name: calls} for ops that ran on the CPU because no rule lowered them
    (torch_tpu.stats("fallbacks"))."""
    return stats("fallbacks")


def reset_fallback_ops():
    _C._reset_fallback_ops()


def set_fallback_mode(mode):
    """'warn' (default: warn once per op), 'error' (raise) or 'silent'.

    The environment variable TORCH_TPU_FALLBACK sets the initial mode."""
    _C._set_fallback_mode(mode)


def runtime_info():
    """Which PJRT plugin runs the tpu device: file, why, API versions, devices."""
    return dict(_C._runtime_info())


def lowered_ops(where=False):
    """Names of the ATen overloads with a native lowering rule; with
    where=True, {name: "csrc/lowering/ops/<file>.cpp:<line>"}, the rule's
    source."""
    if where:
        sources = _C._rule_sources()
        return {name: sources[name] for name in _C._rule_names()}
    return list(_C._rule_names())


from .compiler import compile_stats, reset_compile_stats  # noqa: E402,F401
from .train_step import TrainStep  # noqa: E402,F401

# torch_tpu.tune(...): the tuner; a settings file named by TORCH_TPU_TUNED is applied now.
from . import tune  # noqa: E402

tune._apply_at_start()
