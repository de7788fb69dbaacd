"""vLLM worker on one tpu device: sets the device up, sizes the KV cache and
builds ``TpuModelRunner``. Everything else (executing steps, the KV cache
life cycle) is vLLM's ``Worker``. After warm-up and each step it hands
torch_tpu's program counters to ``counters.report`` (written to a file only
when TORCH_TPU_VLLM_COUNTERS names one)."""

import time
from contextlib import nullcontext

import torch
import torch_tpu
from vllm.config import CompilationMode
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.worker_base import CompilationTimes

from . import attention_in_graph, counters, warmup
from .attention import bucket
from .model_runner import TpuModelRunner

logger = init_logger(__name__)


class TpuWorker(Worker):
    def init_device(self):
        # Serving runs strict eager whatever the process default: a step's
        # model and sampler are already programs of their own, and fused
        # clusters of the glue ops between them would take a new shape, and
        # compile, with each new mix of requests.
        torch_tpu.set_eager_mode("strict")
        self.device = torch.device("tpu", self.local_rank)
        current_platform.set_device(self.device)
        current_platform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(
            self.vllm_config,
            self.rank,
            self.distributed_init_method,
            self.local_rank,
            current_platform.dist_backend,
        )
        set_random_seed(self.model_config.seed)
        self._init_workspace_and_model_runner()

    def _make_model_runner(self) -> TpuModelRunner:
        return TpuModelRunner(self.vllm_config, self.device)

    def determine_available_memory(self) -> int:
        """Bytes for the KV cache: ``kv_cache_memory_bytes`` when given, else
        ``gpu_memory_utilization`` of the device's memory less what is in use."""
        explicit = self.cache_config.kv_cache_memory_bytes
        if explicit:
            return int(explicit)
        free, total = torch.tpu.mem_get_info(self.device)
        used = total - free
        budget = int(total * self.cache_config.gpu_memory_utilization) - used
        if budget <= 0:
            raise ValueError(
                f"no tpu memory left for the KV cache: {used} of {total} bytes are in use and "
                f"gpu_memory_utilization is {self.cache_config.gpu_memory_utilization}; raise it "
                "or pass kv_cache_memory_bytes"
            )
        return budget

    def compile_or_warm_up_model(self) -> CompilationTimes:
        """Builds every program serving needs before the first request:
        one dummy step per token bucket traces and compiles the model's
        pieces (largest first: Dynamo traces the first call, and a trace at
        one token would specialise the graph on it), then real steps over
        made-up requests (warmup.py) build the attention, logits, sampler
        and KV block zeroing programs of every bucket combination. Eager
        mode (enforce_eager) is not warmed: each op compiles on first use."""
        if self.compilation_config.mode != CompilationMode.NONE and not self.model_config.enforce_eager:
            start = time.perf_counter()
            runner = self.model_runner
            max_tokens = self.scheduler_config.max_num_batched_tokens
            # Attention inside the model's program: the trace reads the step's
            # attention tensors, so the dummy steps carry attention metadata.
            in_graph = attention_in_graph.enabled(self.vllm_config)
            for size in reversed(warmup.bucket_sizes(max_tokens)):
                runner._dummy_run(size, force_attention=in_graph, skip_eplb=True, remove_lora=False)
            if in_graph:  # decoding steps read only the key blocks their sequences fill
                block_size = self.cache_config.block_size
                width = -(-self.model_config.max_model_len // block_size)
                decode_rows = bucket(self.scheduler_config.max_num_seqs)
                for blocks in attention_in_graph.key_block_counts(block_size, width):
                    with attention_in_graph.forced_key_blocks(blocks):
                        for size in warmup.bucket_sizes(min(max_tokens, decode_rows)):
                            runner._dummy_run(size, force_attention=True, skip_eplb=True, remove_lora=False)
            if not runner.is_pooling_model:
                steps = warmup.plan_steps(max_tokens, self.scheduler_config.max_num_seqs,
                                          self.model_config.max_model_len, self.cache_config.block_size)
                warmup.run_steps(runner, steps)
                num_blocks = self.cache_config.num_gpu_blocks or 1
                for size in warmup.bucket_sizes(bucket(num_blocks)):
                    if size <= num_blocks:
                        runner._zero_block_ids([0] * size)
            torch.tpu.synchronize()
            logger.info("tpu warm-up: %.1f s, %d programs", time.perf_counter() - start,
                        torch_tpu.cache_info()["misses"])
        set_random_seed(self.model_config.seed)
        counters.report(force=True)
        return CompilationTimes(
            language_model=self.compilation_config.compilation_time,
            encoder=self.compilation_config.encoder_compilation_time,
        )

    def execute_model(self, scheduler_output):
        clock = counters.clock
        clock.begin()
        start = time.perf_counter()
        output = super().execute_model(scheduler_output)
        clock.add("forward_s", time.perf_counter() - start - clock.spent("prepare_s"))
        # A step that samples reports after sample_tokens: one report a step
        # (torch_tpu.cache_info() lists the persistent cache folder, about
        # 1.4 ms at 750 programs here).
        if output is not None:
            clock.end()
            counters.report()
        return output

    def sample_tokens(self, grammar_output):
        clock = counters.clock
        start = time.perf_counter()
        output = super().sample_tokens(grammar_output)
        clock.add("sample_s", time.perf_counter() - start - clock.spent("wait_s"))
        clock.end()
        counters.report()
        return output

    def _maybe_get_memory_pool_context(self, tag: str):
        # No sleep mode, hence no separate memory pools.
        return nullcontext()

    def sleep(self, level: int = 1) -> None:
        raise NotImplementedError("sleep mode is not supported on tpu")

    def wake_up(self, tags=None) -> None:
        raise NotImplementedError("sleep mode is not supported on tpu")
