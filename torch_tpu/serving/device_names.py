"""The names of device tpu and of its backends, as both serving engines'
out-of-tree platforms (vllm/platform.py, sglang/platform.py) give them."""

DIST_BACKEND = "tpu_dist"  # torch.distributed's backend for tpu tensors
COMPILE_BACKEND = "tpu"  # torch.compile's backend


class TpuDeviceNames:
    """The device's names, as class attributes of an engine's platform class
    (a base before the engine's own Platform class)."""
    device_name: str = "tpu"
    device_type: str = "tpu"
    # torch.library key of the device's kernels; an engine registers its
    # custom ops under it for an out-of-tree platform.
    dispatch_key: str = "PrivateUse1"
