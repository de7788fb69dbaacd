"""vLLM model runner on tpu: vLLM's GPU model runner with the model, the KV
cache and the step's device tensors on tpu. What differs from a GPU: no CUDA
streams, events or graphs, host sync by ``torch.tpu.synchronize``, KV block
zeroing with plain tensor ops, a KV cache storage of its own per layer, and
fixed shapes: a step's inputs are built on the host and copied into whole
device buffers, its token count is padded to a bucket, and its logits and
sampler rows to ``padded_num_reqs``, so that every program a step runs is one
the warm-up (warmup.py) built."""

import dataclasses
import time

import numpy as np
import torch
import torch.nn as nn
from vllm.distributed.parallel_state import get_pp_group
from vllm.logger import init_logger
from vllm.model_executor.model_loader import get_model
from vllm.v1.kv_cache_interface import AttentionSpec
from vllm.v1.outputs import LogprobsTensors
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from ...patches.vllm_cuda_streams import without_cuda_streams
from ...patches.vllm_kv_cache import kv_cache_per_layer
from . import counters, sampling_program
from .attention import bucket, padded_token_count
from .sampler import TpuTopKTopPSampler

logger = init_logger(__name__)


# vLLM's built-in logits processors (min-p, logit bias, min tokens): they
# act only on requests that set those parameters.
_BUILTIN_LOGITS_PROCESSORS = "vllm.v1.sample.logits_processor.builtin"


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        if device.type != "tpu":
            raise ValueError(f"TpuModelRunner runs on device tpu, not {device}")
        with without_cuda_streams():
            super().__init__(vllm_config, device)
        self.use_cuda_graph = False
        self.sampler.topk_topp_sampler = TpuTopKTopPSampler(
            self.model_config.logprobs_mode, self.model_config.use_fp64_gumbel)
        # Host copies of step buffers that are plain device tensors in vLLM.
        self._positions_np = np.zeros(self.positions.shape[0], dtype=np.int64)
        self._is_padding_np = np.zeros(self.is_padding.shape[0], dtype=bool)
        self._accepted_tokens_filled = False

    def padded_num_tokens(self, num_tokens: int) -> int:
        """A step's token count padded to its bucket (the next power of two,
        at most max_num_batched_tokens)."""
        return padded_token_count(num_tokens, self.scheduler_config.max_num_batched_tokens)

    def padded_num_reqs(self, num_tokens_padded: int) -> int:
        """Rows of a step's logits and sampler: one per request, padded to
        ``min(padded tokens, bucket(max_num_seqs))``, so that the row count
        follows the token bucket (a decode-only step of R requests pads both
        to bucket(R); a step with prompt chunks samples at most
        bucket(max_num_seqs) rows)."""
        return min(num_tokens_padded, bucket(self.scheduler_config.max_num_seqs))

    def _determine_batch_execution_and_padding(self, num_tokens, *args, **kwargs):
        """Pads the step's token count to its bucket, so that a step's
        programs are the warmed ones; padding tokens write to the null KV
        block and are not sampled."""
        mode, desc, *rest = super()._determine_batch_execution_and_padding(num_tokens, *args, **kwargs)
        if self.vllm_config.parallel_config.data_parallel_size == 1:
            desc = dataclasses.replace(desc, num_tokens=self.padded_num_tokens(desc.num_tokens))
        return (mode, desc, *rest)

    def _host_prepared(self) -> bool:
        """Whether ``_prepare_inputs`` builds the step on the host: plain
        decoder steps (no speculative decoding, M-RoPE, prompt embeddings,
        LoRA, context parallelism, hybrid state or pooling)."""
        return not (self.speculative_config is not None or self.uses_mrope or self.enable_prompt_embeds
                    or self.lora_config or self.is_pooling_model or self.dcp_world_size > 1
                    or self.num_accepted_tokens_event is not None or self.input_batch.req_prompt_embeds
                    or any(table.slot_mapping_mode.name != "TOKEN_TO_KV_SLOT"
                           or table.dcp_world_size * table.pcp_world_size > 1
                           for table in self.input_batch.block_table.block_tables))

    def _prepare_inputs(self, scheduler_output, num_scheduled_tokens):
        """vLLM's step preparation with every device tensor written whole:
        token ids, positions, query start locations, sequence lengths, slot
        mappings and block tables are computed on the host and copied into
        their full device buffers (one fixed shape each), so no program
        depends on the step's request or token count; vLLM's own version
        writes device slices of those counts, a program per count. The
        logits indices come padded to ``padded_num_reqs`` rows (padding rows
        read token 0; ``_sample`` drops their samples)."""
        start = time.perf_counter()
        try:
            return self._prepare_inputs_timed(scheduler_output, num_scheduled_tokens)
        finally:
            counters.clock.add("prepare_s", time.perf_counter() - start)

    def _prepare_inputs_timed(self, scheduler_output, num_scheduled_tokens):
        if not self._host_prepared():
            return super()._prepare_inputs(scheduler_output, num_scheduled_tokens)
        batch = self.input_batch
        total = scheduler_output.total_num_scheduled_tokens
        num_reqs = batch.num_reqs
        req_indices = np.repeat(self.arange_np[:num_reqs], num_scheduled_tokens)
        cu_num_tokens = self._get_cumsum_and_arange(num_scheduled_tokens, self.query_pos.np)
        positions = batch.num_computed_tokens_cpu[req_indices] + self.query_pos.np[:total]
        token_indices = positions + req_indices * batch.token_ids_cpu.shape[1]
        torch.index_select(batch.token_ids_cpu_tensor.flatten(), 0, torch.from_numpy(token_indices),
                           out=self.input_ids.cpu[:total])
        self.input_ids.copy_to_gpu()
        self._positions_np[:total] = positions
        self._positions_np[total:] = 0
        self.positions.copy_(torch.from_numpy(self._positions_np))

        self.query_start_loc.np[0] = 0
        self.query_start_loc.np[1 : num_reqs + 1] = cu_num_tokens
        self.query_start_loc.np[num_reqs + 1 :].fill(cu_num_tokens[-1])
        self.query_start_loc.copy_to_gpu()
        torch.add(batch.num_computed_tokens_cpu_tensor[:num_reqs], torch.from_numpy(num_scheduled_tokens),
                  out=self.optimistic_seq_lens_cpu[:num_reqs])
        self.optimistic_seq_lens_cpu[num_reqs:].fill_(0)
        self.seq_lens.copy_(self.optimistic_seq_lens_cpu)
        self._compute_prev_positions(num_reqs)
        num_tokens = np.array([self.requests[r].num_tokens for r in batch.req_ids], dtype=np.int32)
        # Host copies only: the device copies of these buffers are read by
        # speculative decoding and vLLM's own _prepare_inputs, neither of
        # which runs on this path; num_accepted_tokens stays 1 on it.
        self.discard_request_mask.np[:num_reqs] = self.optimistic_seq_lens_cpu[:num_reqs].numpy() < num_tokens
        self.discard_request_mask.np[num_reqs:] = False
        self.num_accepted_tokens.np.fill(1)
        if not self._accepted_tokens_filled:
            self.num_accepted_tokens.gpu.fill_(1)
            self._accepted_tokens_filled = True
        self.req_indices.np[:total] = req_indices
        self.num_scheduled_tokens.np[:num_reqs] = num_scheduled_tokens
        self.num_scheduled_tokens.np[num_reqs:] = 0

        for table in batch.block_table.block_tables:
            table.block_table.copy_to_gpu()
            block = table.block_size
            blocks = table.block_table.np[req_indices, positions // block].astype(np.int64)
            slots = table.slot_mapping.np
            slots[:total] = blocks * block + positions % block
            slots[total:] = -1
            table.slot_mapping.copy_to_gpu()

        logits_indices = np.zeros(self.padded_num_reqs(self.padded_num_tokens(total)), dtype=np.int64)
        logits_indices[:num_reqs] = cu_num_tokens - 1
        return torch.from_numpy(logits_indices).to(self.device), None, 1

    def _get_slot_mappings(self, num_tokens_padded, num_reqs_padded, num_tokens_unpadded, ubatch_slices=None):
        """vLLM's slot mappings; on the host-prepared path they already hold
        -1 past the step's tokens, so vLLM's padding fill (a program per
        token count) is left out."""
        if not self._host_prepared() or ubatch_slices is not None:
            return super()._get_slot_mappings(num_tokens_padded, num_reqs_padded, num_tokens_unpadded, ubatch_slices)
        by_gid, by_layer = {}, {}
        for gid, group in enumerate(self.kv_cache_config.kv_cache_groups):
            by_gid[gid] = self.input_batch.block_table[gid].slot_mapping.gpu[:num_tokens_padded]
            for name in group.layer_names:
                by_layer[name] = by_gid[gid]
        return by_gid, by_layer

    def _preprocess(self, scheduler_output, num_input_tokens, intermediate_tensors=None):
        """The model's inputs for a host-prepared text step: views of the
        whole token id and position buffers (positions past the step's
        tokens are already 0, so vLLM's zeroing, a program per token count,
        is left out)."""
        if (not self._host_prepared() or self.supports_mm_inputs or self.model_config.is_encoder_decoder
                or not get_pp_group().is_first_rank):
            return super()._preprocess(scheduler_output, num_input_tokens, intermediate_tensors)
        return (self.input_ids.gpu[:num_input_tokens], None, self.positions[:num_input_tokens], None,
                self._init_model_kwargs(), None)

    def _prepare_padding_mask(self, num_tokens_unpadded: int, num_tokens_padded: int) -> torch.Tensor:
        """Which of the padded step's tokens are padding, written whole from the host."""
        self._is_padding_np[:num_tokens_unpadded] = False
        self._is_padding_np[num_tokens_unpadded:] = True
        self.is_padding.copy_(torch.from_numpy(self._is_padding_np))
        return self.is_padding[:num_tokens_padded]

    def _plain_sampling(self, metadata) -> bool:
        """Whether sampling needs nothing per request beyond temperature,
        top-k, top-p, seeds and logprobs (no penalties, allowed or bad
        words, min-p, logit bias, min tokens or custom logits processors),
        so that it can run on padded rows."""
        if not (metadata.no_penalties and metadata.allowed_token_ids_mask is None
                and not metadata.bad_words_token_ids and not metadata.logprob_token_ids
                and not any(metadata.spec_token_ids or ())):
            return False
        if any(type(p).__module__ != _BUILTIN_LOGITS_PROCESSORS for p in metadata.logitsprocs.all):
            return False
        for req_id in self.input_batch.req_ids:
            params = self.requests[req_id].sampling_params
            if params is None or params.min_p or params.logit_bias or params.min_tokens:
                return False
        return True

    def canonical_num_logprobs(self, requested: int | None) -> int | None:
        """The top-logprobs count a step computes: the engine's
        ``max_logprobs`` (capped at the vocabulary) whenever any request
        asks for logprobs, so one program per row count serves every count
        (the engine keeps each request's own count of them)."""
        most = self.model_config.max_logprobs
        if requested is None or most < 0:
            return requested
        return min(most, self.model_config.get_vocab_size())

    def _sample(self, logits, spec_decode_metadata):
        """Samples the padded logits rows (``padded_num_reqs``; the
        parameters of padding rows repeat request 0's); the sampled tokens
        and logprobs come to the host, where padding rows are dropped.

        Sampling options are made uniform so that the programs depend only
        on the row count and on two switches (all greedy or not, logprobs or
        not), every combination of which the warm-up runs; with vLLM's
        default logprobs mode the sampling is one program
        (sampling_program.py): a step with any
        sampled request passes temperature, top-k and top-p for every row
        (top-k = vocabulary and top-p = 1 mask nothing; greedy rows have
        temperature 0 and take the argmax) and computes the greedy and the
        sampled token of each row; logprobs are the engine's maximum count.
        Other sampling (penalties, logits processors, speculative decoding)
        runs vLLM's sampler on the real rows."""
        num_reqs = self.input_batch.num_reqs
        if logits is None or spec_decode_metadata is not None:
            return super()._sample(logits, spec_decode_metadata)
        batch = self.input_batch
        metadata = batch.sampling_metadata
        if not self._plain_sampling(metadata):
            return super()._sample(logits[:num_reqs] if logits.shape[0] != num_reqs else logits, None)
        rows = logits.shape[0]

        greedy = metadata.all_greedy
        temperature = top_p = top_k = None
        if not greedy:
            # Temperature, top-p and top-k in one host-to-device copy.
            params = torch.stack([batch.temperature_cpu_tensor[:rows], batch.top_p_cpu_tensor[:rows],
                                  batch.top_k_cpu_tensor[:rows].float()])
            params[:, num_reqs:] = params[:, :1]
            temperature, top_p, top_k = params.to(self.device).unbind(0)
        num_logprobs = self.canonical_num_logprobs(metadata.max_num_logprobs)
        batch.update_async_output_token_ids()
        if sampling_program.supported(self.sampler.logprobs_mode):
            out = sampling_program.sample(logits, temperature, top_k, top_p, metadata.generators, num_logprobs)
        else:
            metadata = dataclasses.replace(metadata, all_random=False, temperature=temperature, top_p=top_p,
                                           top_k=top_k, max_num_logprobs=num_logprobs)
            out = self.sampler(logits=logits, sampling_metadata=metadata)
        start = time.perf_counter()
        out.sampled_token_ids = out.sampled_token_ids.cpu()[:num_reqs]
        counters.clock.add("wait_s", time.perf_counter() - start)
        if out.logprobs_tensors is not None:
            lp = out.logprobs_tensors
            out.logprobs_tensors = LogprobsTensors(
                lp.logprob_token_ids.cpu()[:num_reqs], lp.logprobs.cpu()[:num_reqs],
                lp.selected_token_ranks.cpu()[:num_reqs])
        return out

    def load_model(self, load_dummy_weights: bool = False) -> None:
        if load_dummy_weights:
            raise ValueError("dummy weights (elastic EP scale-up) are not supported on tpu")
        logger.info("Loading model %s onto %s", self.model_config.model, self.device)
        self.model = get_model(vllm_config=self.vllm_config)
        self.model_memory_usage = sum(p.numel() * p.element_size() for p in self.model.parameters())
        if self.lora_config:
            self.model = self.load_lora_model(self.model, self.vllm_config, self.device)

    def initialize_kv_cache_tensors(self, *args, **kwargs) -> dict[str, torch.Tensor]:
        with kv_cache_per_layer():
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
        # Padded to a bucket by repeating the first block: one program per bucket.
        padded = list(block_ids) + [block_ids[0]] * (bucket(len(block_ids)) - len(block_ids))
        ids = torch.tensor(padded, dtype=torch.int64).to(self.device)
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
                kv.index_fill_(0, ids, 0)
