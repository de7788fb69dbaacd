"""vLLM model runner on tpu: vLLM's GPU model runner with the model, the KV
cache and the step's device tensors on tpu. What differs from a GPU: no CUDA
streams, events or graphs, host sync by ``torch.tpu.synchronize``, KV block
zeroing with plain tensor ops, and a KV cache storage of its own per layer."""

import dataclasses
from contextlib import contextmanager

import torch
import torch.nn as nn
import vllm.v1.worker.gpu_model_runner as gpu_model_runner
from vllm.logger import init_logger
from vllm.model_executor.model_loader import get_model
from vllm.v1.kv_cache_interface import AttentionSpec
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

logger = init_logger(__name__)


class _NoEvent:
    """Stands in for a CUDA event: tpu steps are ordered on one queue."""

    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass

    def wait(self, *args, **kwargs):
        pass


class _NoStream:
    """Stands in for a side CUDA stream."""

    def __init__(self, *args, **kwargs):
        self.device = torch.device("tpu")

    def wait_stream(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass


@contextmanager
def _without_cuda_streams():
    """vLLM's runner creates CUDA events and streams while it is built."""
    saved = torch.Event, torch.cuda.Event, torch.cuda.Stream
    torch.Event, torch.cuda.Event, torch.cuda.Stream = _NoEvent, _NoEvent, _NoStream
    try:
        yield
    finally:
        torch.Event, torch.cuda.Event, torch.cuda.Stream = saved


def _allocate_kv_cache_per_layer(kv_cache_config, device, layout, kernel_block_sizes=None):
    """vLLM's KV cache views (one shape, dtype and layer per view), each backed
    by a tpu storage of its own in the cache dtype instead of one shared int8
    allocation. A tpu in-place write computes its whole storage's new buffer:
    through a float view of the shared int8 buffer, one step's KV write to one
    layer rewrote every layer's cache (about 100 ms per layer for a 64 MiB
    cache); on its own storage it updates that buffer in place."""
    views = _vllm_allocate_kv_cache(kv_cache_config, torch.device("meta"), layout, kernel_block_sizes)
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


_vllm_allocate_kv_cache = gpu_model_runner.allocate_kv_cache


@contextmanager
def _kv_cache_per_layer():
    """vLLM's runner allocates the KV cache through its module's ``allocate_kv_cache``."""
    gpu_model_runner.allocate_kv_cache = _allocate_kv_cache_per_layer
    try:
        yield
    finally:
        gpu_model_runner.allocate_kv_cache = _vllm_allocate_kv_cache


def token_bucket(n: int) -> int:
    """The next power of two >= n (torch_tpu's default shape buckets)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        if device.type != "tpu":
            raise ValueError(f"TpuModelRunner runs on device tpu, not {device}")
        with _without_cuda_streams():
            super().__init__(vllm_config, device)
        self.use_cuda_graph = False

    def _determine_batch_execution_and_padding(self, num_tokens, *args, **kwargs):
        """Pads the step's token count to its bucket (the next power of two,
        at most max_num_batched_tokens), so that a step's programs are the
        warmed ones; padding tokens write to the null KV block and are not
        sampled."""
        mode, desc, *rest = super()._determine_batch_execution_and_padding(num_tokens, *args, **kwargs)
        if self.vllm_config.parallel_config.data_parallel_size == 1:
            limit = self.scheduler_config.max_num_batched_tokens
            padded = min(token_bucket(desc.num_tokens), max(limit, desc.num_tokens))
            desc = dataclasses.replace(desc, num_tokens=padded)
        return (mode, desc, *rest)

    def load_model(self, load_dummy_weights: bool = False) -> None:
        if load_dummy_weights:
            raise ValueError("dummy weights (elastic EP scale-up) are not supported on tpu")
        logger.info("Loading model %s onto %s", self.model_config.model, self.device)
        self.model = get_model(vllm_config=self.vllm_config)
        self.model_memory_usage = sum(p.numel() * p.element_size() for p in self.model.parameters())
        if self.lora_config:
            self.model = self.load_lora_model(self.model, self.vllm_config, self.device)

    def initialize_kv_cache_tensors(self, *args, **kwargs) -> dict[str, torch.Tensor]:
        with _kv_cache_per_layer():
            return super().initialize_kv_cache_tensors(*args, **kwargs)

    def get_model(self) -> nn.Module:
        return self.model

    def _sync_device(self) -> None:
        torch.tpu.synchronize()

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        return sampled_token_ids.tolist()

    def _init_kv_zero_meta(self) -> None:
        """Blocks are zeroed by ``_zero_block_ids`` with tensor ops; nothing to precompute."""

    def _zero_block_ids(self, block_ids: list[int]) -> None:
        """Zero newly allocated KV blocks: attention multiplies masked-out
        slots by zero, which would keep a NaN left in a reused block."""
        if not block_ids:
            return
        seen = set()
        for group in self.kv_cache_config.kv_cache_groups:
            if not isinstance(group.kv_cache_spec, AttentionSpec):
                continue
            for name in group.layer_names:
                layer = self.compilation_config.static_forward_context.get(name)
                kv = getattr(layer, "kv_cache", None)
                if not isinstance(kv, torch.Tensor) or kv.numel() == 0:
                    continue
                key = (kv.untyped_storage().data_ptr(), kv.storage_offset())
                if key in seen:
                    continue
                seen.add(key)
                ids = torch.tensor(block_ids, dtype=torch.int64).to(kv.device)
                kv.index_fill_(0, ids, 0)
