"""torch.tpu: the tpu counterpart of torch.cuda."""
import contextlib

import torch

from . import _C
from . import amp  # noqa: F401  (torch.tpu.amp)

_init_error = None


def _lazy_init():
    global _init_error
    try:
        return _C._device_count()
    except RuntimeError as e:  # no plugin, or ABI refused
        _init_error = e
        raise


def is_available():
    """True when a PJRT plugin loaded and has at least one device."""
    try:
        return _lazy_init() > 0
    except RuntimeError:
        return False


def is_initialized():
    return _C._is_initialized()


def __getattr__(name):
    # `_initialized` mirrors torch.cuda._initialized: torch.utils.checkpoint
    # reads it to decide whether to save and restore the device RNG state, so
    # it must follow the runtime, not a Python flag set on one path.
    if name == "_initialized":
        return _C._is_initialized()
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


def init():
    _lazy_init()


def device_count():
    try:
        return _lazy_init()
    except RuntimeError:
        return 0


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        return device.index if device.index is not None else current_device()
    raise TypeError(f"expected a device index, string or torch.device, got {type(device).__name__}")


def current_device():
    return _C._current_device()


def set_device(device):
    idx = _index(device)
    n = device_count()
    if not 0 <= idx < n:
        raise ValueError(f"tpu:{idx} does not exist: this process has {n} tpu device(s)")
    _C._set_device(idx)


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device):
        self.idx = _index(device) if device is not None else -1
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C._set_device(self.prev)
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else None)


def synchronize(device=None):
    """Waits until every program issued on the device has finished."""
    _C._synchronize(_index(device))


# ---- random numbers -------------------------------------------------------------

def default_generators():
    return tuple(_C._default_generator(i) for i in range(device_count()))


def _gen(device=None):
    return _C._default_generator(_index(device))


def manual_seed(seed):
    if not _C._is_initialized():  # seeding must not start the device (see manual_seed_all)
        _C._queue_seed(current_device(), int(seed))
        return
    _gen().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds every device's default generator. Before the device has started
    (torch.manual_seed calls this in every process, DataLoader workers
    included) the seed is kept and applied when it starts."""
    if not _C._is_initialized():
        _C._queue_seed(-1, int(seed))
        return
    for i in range(device_count()):
        _C._default_generator(i).manual_seed(int(seed))


def seed():
    return _gen().seed()


def seed_all():
    s = seed()
    manual_seed_all(s)


def initial_seed():
    return _gen().initial_seed()


def get_rng_state(device="tpu"):
    return _gen(device).get_state()


def set_rng_state(new_state, device="tpu"):
    _gen(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states):
    for i, s in enumerate(states):
        set_rng_state(s, i)


# ---- memory (the project's own accounting of live PJRT buffer bytes) ----------------

def memory_allocated(device=None):
    return _C._memory_allocated(_index(device))


def max_memory_allocated(device=None):
    return _C._max_memory_allocated(_index(device))


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def memory_reserved(device=None):
    # PJRT owns the allocator; bytes reserved equal bytes in live buffers.
    return memory_allocated(device)


def max_memory_reserved(device=None):
    return max_memory_allocated(device)


def memory_stats(device=None):
    idx = _index(device)
    cur, peak = _C._memory_allocated(idx), _C._max_memory_allocated(idx)
    # Every live PJRT buffer belongs to a tensor: allocated = active = reserved.
    # PJRT allocates each buffer once, with no cache to flush and retry, so
    # num_alloc_retries is always 0; num_ooms counts this process's
    # out-of-memory errors on the device (allocator and programs).
    return {
        "allocated_bytes.all.current": cur,
        "allocated_bytes.all.peak": peak,
        "active_bytes.all.current": cur,
        "active_bytes.all.peak": peak,
        "reserved_bytes.all.current": cur,
        "reserved_bytes.all.peak": peak,
        "active.all.current": _C._live_buffers(idx),
        "capacity_bytes": _C._memory_capacity(idx),
        "num_alloc_retries": 0,
        "num_ooms": _C._num_ooms(idx),
    }


def mem_get_info(device=None):
    idx = _index(device)
    cap = _C._memory_capacity(idx)
    return cap - _C._memory_allocated(idx), cap


def empty_cache():
    """PJRT buffers are released as soon as tensors die. On the CPU plugin, whose
    device memory is the process heap, freed memory stays in the heap for the
    next program (TORCH_TPU_HOST_HEAP, see csrc/runtime/host_heap.h); this hands
    the heap's unused memory back to the system."""
    if _C._is_initialized():
        _C._release_host_heap()


def _format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def memory_summary(device=None, abbreviated=False):
    """A printable table of the device's memory statistics, as torch.cuda.memory_summary.

    PJRT owns device memory and frees a buffer when its last tensor dies, so
    reserved equals allocated and there is no allocator cache to report."""
    idx = _index(device)
    stats = memory_stats(idx)
    cap = stats["capacity_bytes"]
    rows = [
        ("Allocated memory", _format_bytes(stats["allocated_bytes.all.current"]),
         _format_bytes(stats["allocated_bytes.all.peak"])),
        ("Reserved memory", _format_bytes(stats["reserved_bytes.all.current"]),
         _format_bytes(stats["reserved_bytes.all.peak"])),
        ("Live buffers", str(stats["active.all.current"]), ""),
        ("Device capacity", _format_bytes(cap), ""),
    ]
    width = 75
    lines = ["=" * width,
             f" tpu:{idx} memory summary ({get_device_name(idx)})"[:width],
             "-" * width,
             f" {'Metric':<28}{'Current':>22}{'Peak':>24}",
             "-" * width]
    lines += [f" {name:<28}{cur:>22}{peak:>24}" for name, cur, peak in rows]
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


# ---- device description -------------------------------------------------------------

def get_device_name(device=None):
    idx = _index(device)
    info = _C._runtime_info()
    return f"{_C._device_kind(idx)} ({info['platform_name']} PJRT plugin, API {info['pjrt_api_version']})"


class _DeviceProperties:
    def __init__(self, idx):
        info = _C._runtime_info()
        self.name = _C._device_kind(idx)
        self.index = idx
        self.platform = info["platform_name"]
        self.platform_version = info["platform_version"]
        self.plugin_path = info["plugin_path"]
        self.pjrt_api_version = info["pjrt_api_version"]
        self.total_memory = _C._memory_capacity(idx)
        self.description = _C._device_description(idx)

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, plugin='{self.plugin_path}')")


def get_device_properties(device=None):
    return _DeviceProperties(_index(device))


def get_device_capability(device=None):
    return (0, 0)


def is_bf16_supported(including_emulation=True):
    """XLA computes bfloat16 on every plugin (natively on a TPU)."""
    return True


def is_fp16_supported(including_emulation=True):
    return True


def get_amp_supported_dtype():
    """The dtypes torch.autocast("tpu", dtype=...) accepts (PyTorch asks the device module)."""
    return [torch.float16, torch.bfloat16]


# ---- streams and events (torch_tpu/_streams.py) ---------------------------------------

from ._streams import (  # noqa: E402,F401
    Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream,
)


def _is_in_bad_fork():
    """True in a child forked after this process used the device (it cannot use it)."""
    return _C._is_in_bad_fork()


# ---- TorchTPU's names: precision (torch_tpu/precision.py), cache telemetry ----------

from .precision import Precision, get_precision, precision  # noqa: E402,F401
from ._cache_stats import (  # noqa: E402,F401
    _clear_cache, _get_cache_hits, _get_cache_misses, _get_cache_stats, _hbm_usage_summary,
)
