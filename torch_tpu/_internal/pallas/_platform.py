"""The platform JAX exports for: the one of the PJRT plugin torch_tpu runs on."""
import functools

# PJRT platform names -> JAX's lowering platform names.
_JAX_NAME = {"cpu": "cpu", "tpu": "tpu", "cuda": "cuda", "gpu": "cuda", "rocm": "rocm"}


@functools.cache
def platform() -> str:
    from torch_tpu import _C
    name = str(_C._runtime_info()["platform_name"]).lower()
    return _JAX_NAME.get(name, name)
