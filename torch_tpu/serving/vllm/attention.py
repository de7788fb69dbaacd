"""Paged attention for vLLM on tpu, built from plain PyTorch ops (no vLLM C ops).

KV cache of one layer: ``[num_blocks, num_kv_heads, block_size, 2 * head_size]``
(vLLM's LBHNC layout); the last dimension holds a token's key then its value.
Writes scatter the step's keys and values to their slots (``slot_mapping``);
reads gather each request's blocks (``block_table``) into
``[requests, kv_heads, blocks * block_size, head_size]``. Queries are packed
per request into ``[requests, max_query_len, heads, head_size]`` and masked
causally: query ``q`` of a request with ``ctx`` cached tokens (prefix cache or
earlier chunks) sees key positions ``0 .. ctx + q``.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
)
from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend
from vllm.v1.kv_cache_interface import AttentionSpec, EncoderOnlyAttentionSpec

BACKEND_CLASS = f"{__name__}.TpuAttentionBackend"


@dataclass
class TpuAttentionMetadata:
    num_actual_tokens: int
    num_reqs: int
    max_query_len: int
    # [requests, blocks]: the blocks holding each request's keys, in order.
    block_table: torch.Tensor
    # [tokens]: each token's KV slot (block * block_size + offset).
    slot_mapping: torch.Tensor
    # [requests * max_query_len]: the packed token at each padded query row
    # (0 for padding rows).
    query_rows: torch.Tensor
    # [tokens]: each token's padded query row.
    token_rows: torch.Tensor
    # [requests, max_query_len, keys]: True where a query attends to a key.
    mask: torch.Tensor


def _bucket(n: int) -> int:
    """The next power of two >= n: padded sizes keep the programs few."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _host_layout(query_start_loc: np.ndarray, seq_lens: np.ndarray, num_keys: int, causal: bool,
                 num_reqs: int, max_query_len: int, num_tokens: int):
    """Query packing and mask, computed on the host from the step's lengths,
    padded to ``num_reqs`` requests of ``max_query_len`` queries; the
    ``num_tokens`` packed tokens past the real ones (token padding) read row 0."""
    real_reqs = len(seq_lens)
    query_lens = np.zeros(num_reqs, dtype=np.int64)
    query_lens[:real_reqs] = np.diff(query_start_loc)
    seq_lens = np.concatenate([seq_lens, np.zeros(num_reqs - real_reqs, dtype=np.int64)])
    req_of_token = np.repeat(np.arange(num_reqs), query_lens)
    real_tokens = len(req_of_token)
    offset_in_req = np.arange(real_tokens) - query_start_loc[req_of_token]
    token_rows = np.zeros(num_tokens, dtype=np.int64)
    token_rows[:real_tokens] = req_of_token * max_query_len + offset_in_req
    query_rows = np.zeros(num_reqs * max_query_len, dtype=np.int64)
    query_rows[token_rows[:real_tokens]] = np.arange(real_tokens)
    q = np.arange(max_query_len)[None, :, None]
    k = np.arange(num_keys)[None, None, :]
    if causal:
        context = (seq_lens - query_lens)[:, None, None]
        mask = k <= context + q
    else:
        mask = np.broadcast_to(k < query_lens[:, None, None], (num_reqs, max_query_len, num_keys))
    # Padding rows attend to key 0 so that their softmax stays finite.
    mask = mask | ((q >= query_lens[:, None, None]) & (k == 0))
    return query_rows, token_rows, np.ascontiguousarray(mask)


class TpuAttentionMetadataBuilder(AttentionMetadataBuilder[TpuAttentionMetadata]):
    def __init__(self, kv_cache_spec: AttentionSpec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        self.encoder_only = isinstance(kv_cache_spec, EncoderOnlyAttentionSpec)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata, fast_build: bool = False):
        m = common_attn_metadata
        real_reqs = m.num_reqs
        query_start_loc = m.query_start_loc_cpu[: real_reqs + 1].numpy().astype(np.int64)
        seq_lens = m.seq_lens[:real_reqs].cpu().numpy().astype(np.int64)
        causal = bool(m.causal) if not isinstance(m.causal, torch.Tensor) else True
        table = m.block_table_tensor
        # Requests, queries per request and key blocks are padded to buckets.
        num_reqs = _bucket(real_reqs)
        max_query_len = _bucket(int(np.diff(query_start_loc).max()) if real_reqs else 1)
        if self.encoder_only or not causal:
            num_blocks = 0
            num_keys = max_query_len
            causal = False
        else:
            needed = -(-int(seq_lens.max()) // self.block_size) if real_reqs else 1
            num_blocks = min(_bucket(needed), max(table.shape[1], needed))
            num_keys = num_blocks * self.block_size
        table = table[:, :num_blocks]
        if table.shape[0] < num_reqs:  # padding requests read the null block
            table = torch.nn.functional.pad(table, (0, 0, 0, num_reqs - table.shape[0]))
        query_rows, token_rows, mask = _host_layout(
            query_start_loc, seq_lens, num_keys, causal, num_reqs, max_query_len, m.num_actual_tokens)
        device = m.slot_mapping.device
        return TpuAttentionMetadata(
            num_actual_tokens=m.num_actual_tokens,
            num_reqs=num_reqs,
            max_query_len=max_query_len,
            block_table=table[:num_reqs],
            slot_mapping=m.slot_mapping,
            query_rows=torch.from_numpy(query_rows).to(device),
            token_rows=torch.from_numpy(token_rows).to(device),
            mask=torch.from_numpy(mask).to(device),
        )


class TpuAttentionImpl(AttentionImpl):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes=None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks=None,
    ) -> None:
        if alibi_slopes is not None or sliding_window is not None or sinks is not None:
            raise NotImplementedError("tpu attention has no ALiBi, sliding window or sinks")
        if logits_soft_cap:
            raise NotImplementedError("tpu attention has no logits soft cap")
        if kv_cache_dtype != "auto":
            raise NotImplementedError(f"tpu attention keeps the KV cache in the model dtype, not {kv_cache_dtype}")
        if attn_type not in (AttentionType.DECODER, AttentionType.ENCODER_ONLY):
            raise NotImplementedError(f"tpu attention does not support {attn_type} attention")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.attn_type = attn_type
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        """Scatters the step's keys and values into their slots."""
        if self.attn_type == AttentionType.ENCODER_ONLY or kv_cache.numel() == 0:
            return
        num_blocks, _, block_size, _ = kv_cache.shape
        n = slot_mapping.shape[0]
        # Padding tokens carry slot -1; they write into block 0, vLLM's
        # null block, which no request reads.
        slots = slot_mapping.clamp(min=0).to(torch.int64)
        blocks = torch.div(slots, block_size, rounding_mode="floor")
        offsets = slots - blocks * block_size
        kv = torch.cat([key[:n], value[:n]], dim=-1).to(kv_cache.dtype)
        kv_cache[blocks, :, offsets] = kv

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale=None, output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("tpu attention has no fused output quantization")
        if attn_metadata is None:  # profiling run
            return output.fill_(0)
        m = attn_metadata
        n = m.num_actual_tokens
        r, qmax = m.num_reqs, m.max_query_len
        d, h, hkv = self.head_size, self.num_heads, self.num_kv_heads
        group = h // hkv
        if self.attn_type == AttentionType.ENCODER_ONLY:
            # Keys are the request's own tokens: [r, hkv, qmax, d].
            k = key[:n][m.query_rows].view(r, qmax, hkv, d).transpose(1, 2)
            v = value[:n][m.query_rows].view(r, qmax, hkv, d).transpose(1, 2)
        else:
            nb = m.block_table.shape[1]
            bs = kv_cache.shape[2]
            kv = kv_cache[m.block_table.to(torch.int64)]  # [r, nb, hkv, bs, 2d]
            kv = kv.permute(0, 2, 1, 3, 4).reshape(r, hkv, nb * bs, 2 * d)
            k, v = kv[..., :d], kv[..., d:]
        q = query[:n][m.query_rows].view(r, qmax, hkv, group, d)
        q = q.permute(0, 2, 3, 1, 4).reshape(r, hkv, group * qmax, d)
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * self.scale
        scores = scores.view(r, hkv, group, qmax, -1)
        scores = scores.masked_fill(~m.mask[:, None, None], float("-inf"))
        probs = torch.softmax(scores, dim=-1).view(r, hkv, group * qmax, -1)
        out = torch.matmul(probs, v.float()).view(r, hkv, group, qmax, d)
        out = out.permute(0, 3, 1, 2, 4).reshape(r * qmax, h, d)[m.token_rows]
        output[:n].copy_(out.reshape(output[:n].shape).to(output.dtype))
        return output


@register_backend(AttentionBackendEnum.CUSTOM, BACKEND_CLASS)
class TpuAttentionBackend(AttentionBackend):
    # The KV write is vLLM's separate step (do_kv_cache_update).
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return "CUSTOM"

    @staticmethod
    def get_impl_cls():
        return TpuAttentionImpl

    @staticmethod
    def get_builder_cls():
        return TpuAttentionMetadataBuilder

    @classmethod
    def supported_kv_cache_layouts(cls):
        from vllm.v1.kv_cache_interface import KVCacheLayout

        return (KVCacheLayout.LBHNC,)

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type in (AttentionType.DECODER, AttentionType.ENCODER_ONLY)

    @classmethod
    def supports_non_causal(cls) -> bool:
        return True
