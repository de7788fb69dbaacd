"""SGLang platform plugin for device ``tpu``.

SGLang calls :func:`activate` through the ``sglang.srt.platforms`` entry point
(pyproject.toml) in each process that resolves
``sglang.srt.platforms.current_platform``; the returned class path becomes that
platform. ``SGLANG_PLATFORM=tpu`` selects it when several plugins are installed.
Install SGLang with ``bash scripts/setup.sh --sglang``.
"""

PLATFORM_CLASS = "torch_tpu.serving.sglang.platform.TpuSRTPlatform"


def activate():
    """Entry point: the platform class path when a tpu device is usable, else None."""
    import torch

    import torch_tpu  # registers device "tpu"

    if not torch.tpu.is_available():
        return None
    # Serving runs strict eager whatever the process default: fused clusters
    # of a step's ops would take a new shape, and compile, with each new mix
    # of requests.
    torch_tpu.set_eager_mode("strict")
    return PLATFORM_CLASS
