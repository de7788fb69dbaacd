"""What chip the tpu device is, as TorchTPU's callers ask (Helion's Pallas
launcher picks Mosaic's target from it)."""


def get_tpu_device_name():
    """The device kind of tpu device 0 ("TPU v5 lite", "TPU v7", ...) when
    the plugin in use is a TPU's; None on any other plugin (the CPU plugin
    has no TPU chip to name)."""
    from torch_tpu import _C
    info = _C._runtime_info()
    if str(info["platform_name"]).lower() != "tpu" or not info["device_kinds"]:
        return None
    return info["device_kinds"][0]
