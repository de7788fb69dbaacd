"""What the device is: the plugin's platform, and the chip as TorchTPU's
callers ask (Helion's Pallas launcher picks Mosaic's target from it)."""
import functools


@functools.cache
def plugin_platform() -> str:
    """The PJRT platform of the plugin torch_tpu runs on, lower case
    ("tpu", "cpu", "cuda", ...)."""
    from torch_tpu import _C
    return str(_C._runtime_info()["platform_name"]).lower()


def get_tpu_device_name():
    """The device kind of tpu device 0 ("TPU v5 lite", "TPU v7", ...) when
    the plugin in use is a TPU's; None on any other plugin (the CPU plugin
    has no TPU chip to name)."""
    from torch_tpu import _C
    info = _C._runtime_info()
    if plugin_platform() != "tpu" or not info["device_kinds"]:
        return None
    return info["device_kinds"][0]
