"""TorchTPU's cache telemetry names on torch.tpu: ``_clear_cache()``,
``_get_cache_stats()``, ``_get_cache_hits()``, ``_get_cache_misses()``,
``_hbm_usage_summary()``, over this project's program cache
(torch_tpu.cache_info())."""
import dataclasses

from . import _C
from ._stats import stats


@dataclasses.dataclass(frozen=True)
class EntryStats:
    """One program held in memory: the key it is cached under, its mode
    ("eager", "fused", "graph") and read_count, its cache hits since stored.
    (TorchTPU's entries also give compilation_duration; the program cache
    here keeps compile time per mode only: torch_tpu.cache_info()["modes"].)"""

    key: str
    mode: str
    read_count: int


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """Program cache counters since the last _clear_cache() (every mode:
    eager ops, fused clusters, torch.compile graphs). num_cache_reqs is
    hits + misses; num_compilations counts XLA compilations (a program
    loaded from the persistent compile cache is a miss but no compilation)."""

    num_cache_reqs: int
    num_cache_hits: int
    num_cache_misses: int
    num_compilations: int
    compilation_seconds: float
    num_entries: int
    num_evictions: int
    per_entry_stats: tuple  # EntryStats, most recently used first


def _clear_cache():
    """Drops every compiled program held in memory and zeros the counters
    (torch_tpu.cache_clear()); the next call of each program compiles it
    again, or loads it from the persistent compile cache."""
    _C._fused_flush("python")  # a pending cluster runs before its program could be dropped
    _C._cache_clear()


def _get_cache_stats():
    info = stats("programs")
    return CacheStats(
        num_cache_reqs=info["hits"] + info["misses"],
        num_cache_hits=info["hits"],
        num_cache_misses=info["misses"],
        num_compilations=info["compiles"],
        compilation_seconds=info["compile_seconds"],
        num_entries=info["entries"],
        num_evictions=info["evictions"],
        per_entry_stats=tuple(EntryStats(k.decode("utf-8", "backslashreplace"), mode, reads)
                              for k, mode, reads in _C._program_cache_entries()),
    )


def _get_cache_hits():
    return stats("programs")["hits"]


def _get_cache_misses():
    return stats("programs")["misses"]


def _hbm_usage_summary():
    """One line per device: its live buffer bytes (tensors) and the number of
    compiled programs held. TorchTPU reports the device memory of the compiled
    code itself; the PJRT C API bound here gives no code size, so that part
    is the count of executables."""
    info = stats("programs")
    if not _C._is_initialized():
        return f"0 B in 0 buffers; {info['entries']} executables (the tpu device has not started)"
    from .tpu import _format_bytes

    lines = []
    for d in range(_C._device_count()):
        lines.append(f"tpu:{d}: {_format_bytes(_C._memory_allocated(d))} in {_C._live_buffers(d)} buffers")
    return "\n".join(lines) + f"\n{info['entries']} executables cached"
