"""The platform JAX exports for: the one of the PJRT plugin torch_tpu runs on."""
from torch_tpu._internal.utils.hardware import plugin_platform

# PJRT platform names -> JAX's lowering platform names.
_JAX_NAME = {"cpu": "cpu", "tpu": "tpu", "cuda": "cuda", "gpu": "cuda", "rocm": "rocm"}


def platform() -> str:
    name = plugin_platform()
    return _JAX_NAME.get(name, name)


def interpreted() -> bool:
    """Whether Pallas kernels run through the interpret lowering: on every
    plugin but TPU (Mosaic kernels run on libtpu only)."""
    return platform() != "tpu"
