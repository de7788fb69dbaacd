"""vLLM platform plugin for device ``tpu``.

vLLM calls :func:`register` through the ``vllm.platform_plugins`` entry point
(pyproject.toml) in every process it starts; the returned class path becomes
``vllm.platforms.current_platform``. The pieces: ``platform.TpuPlatform``
(configuration), ``worker.TpuWorker`` (device, memory, distributed),
``model_runner.TpuModelRunner`` (model and KV cache on tpu) and
``attention.TpuAttentionBackend`` (paged attention in plain PyTorch ops).
"""

PLATFORM_CLASS = "torch_tpu.serving.vllm.platform.TpuPlatform"


def register():
    """Entry point: the platform class path when a tpu device is usable, else None."""
    import torch_tpu  # noqa: F401  (registers device "tpu")
    import torch

    if not torch.tpu.is_available():
        return None
    return PLATFORM_CLASS
