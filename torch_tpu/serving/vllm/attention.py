"""Paged attention for vLLM on tpu, built from plain PyTorch ops (no vLLM C ops).

KV cache of one layer: ``[num_blocks, num_kv_heads, block_size, 2 * head_size]``
(vLLM's LBHNC layout); the last dimension holds a token's key then its value.
Writes scatter the step's keys and values to their slots (``slot_mapping``).

Every tensor shape that reaches a tpu program is drawn from a small set of
buckets, so that the warm-up (worker.py) builds every program serving needs:
the step's token count ``T`` is already padded to its bucket by the model
runner, and a step's requests are attended in groups of fixed shape:

- *decode group*: every request with one query this step (decodes, and
  one-token prompt chunks), batched as ``[D, 1 query, K keys]`` with
  ``D = min(T, bucket(max_num_seqs))`` rows and ``K`` the bucket of the
  longest of their sequences, in KV blocks;
- *one prefill group per request* with more than one query (a prompt or a
  chunk of one), as ``[1, Q, K]``: ``Q`` the bucket of its query count, ``K``
  the bucket of its sequence length in blocks.

Why this layout: work stays proportional to the step (decode rows are at
most twice the decode requests, or bounded by the step's padded tokens;
each prefill chunk costs at most 2x its queries times 2x its keys), never
``requests x tokens x keys``; and the shapes depend on (T, K) for the decode
group and on (T, Q, K) for a prefill group only, a few dozen combinations
that the warm-up enumerates. A Python loop over a step's prefill chunks is
cheap (a step holds at most max_num_batched_tokens tokens) and each eager
tpu op is a cached program per shape. Queries are gathered by row index from
the step's tokens; each group's results are scattered into one
``[T + 1, heads * head_size]`` buffer whose last row takes the padding rows.

Encoder-only attention (embedding models) uses the prefill groups with the
request's own tokens as keys.
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

from .attention_in_graph import attend, write_kv
from .attention_in_graph import enabled as in_graph_enabled
from .attention_in_graph import key_blocks as in_graph_key_blocks

BACKEND_CLASS = f"{__name__}.TpuAttentionBackend"


def bucket(n: int) -> int:
    """The next power of two >= n: padded sizes keep the programs few."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def padded_token_count(n: int, max_num_batched_tokens: int) -> int:
    """A step's token count as the model runner pads it: its bucket, at most
    max_num_batched_tokens (a count above that limit is kept)."""
    return min(bucket(n), max(max_num_batched_tokens, n))


def key_blocks(seq_len: int, block_size: int, width: int) -> int:
    """KV blocks read for a sequence of seq_len tokens: the bucket of the
    blocks it fills, at most the block table's width."""
    needed = max(1, -(-int(seq_len) // block_size))
    return max(needed, min(bucket(needed), width))


@dataclass
class AttentionGroup:
    """Requests attended together with one fixed shape:
    ``batch`` x ``queries`` query rows against ``keys`` keys each."""

    batch: int
    queries: int
    keys: int
    # [batch * queries]: the step token each query row reads (padding rows read a real one).
    q_index: torch.Tensor
    # [batch * queries]: the output row each query row writes (padding rows: the step's padded token count).
    out_index: torch.Tensor
    # [batch]: each row's request in the step (its block table row); None for encoder-only.
    req_index: torch.Tensor | None
    # [batch, queries, keys]: True where a query attends to a key.
    mask: torch.Tensor


@dataclass
class TpuAttentionMetadata:
    num_actual_tokens: int
    # The step's token count as padded by the model runner (rows of query and output).
    num_tokens: int
    # [rows, blocks]: the whole block table buffer (rows past the step's requests are stale and unread).
    block_table: torch.Tensor | None
    # [tokens]: each token's KV slot (block * block_size + offset); -1 for padding.
    slot_mapping: torch.Tensor
    groups: list[AttentionGroup]
    # [3, tokens]: each token's request (its block table row), position and
    # context (its request's tokens in the cache before the step), for
    # attention inside the model's program (attention_in_graph.py); None
    # where the groups are used.
    token_rows: torch.Tensor | None = None


def plan_token_rows(query_start_loc: np.ndarray, seq_lens: np.ndarray, num_tokens: int) -> np.ndarray:
    """[3, num_tokens] int64: each of the step's tokens' request index,
    position in its sequence, and its request's context (tokens before this
    step); padding tokens: request 0, position 0, context -1."""
    query_lens = np.diff(query_start_loc)
    n = int(query_start_loc[-1])
    rows = np.zeros((3, num_tokens), dtype=np.int64)
    req = np.repeat(np.arange(len(query_lens)), query_lens)
    context = (seq_lens - query_lens)[req]
    rows[0, :n] = req
    rows[1, :n] = context + np.arange(n) - query_start_loc[:-1][req]
    rows[2, :n] = context
    rows[2, n:] = -1
    return rows


def plan_groups(query_start_loc: np.ndarray, seq_lens: np.ndarray, num_tokens: int, block_size: int,
                width: int, max_decode_rows: int, causal: bool) -> list[dict]:
    """The step's attention groups (see the module docstring), on the host,
    as numpy arrays: query_start_loc [requests + 1] and seq_lens [requests]
    of the real requests; num_tokens the padded token count. Encoder-only
    (not causal): every request is a group whose keys are its own tokens."""
    query_lens = np.diff(query_start_loc)
    context = seq_lens - query_lens
    groups = []
    if causal:
        decode = np.nonzero(query_lens == 1)[0]
        many = np.nonzero(query_lens > 1)[0]
    else:
        decode, many = np.zeros(0, dtype=np.int64), np.nonzero(query_lens >= 1)[0]
    if len(decode):
        rows, n = min(num_tokens, max_decode_rows), len(decode)
        keys = key_blocks(seq_lens[decode].max(), block_size, width) * block_size
        q_index = np.zeros(rows, dtype=np.int64)
        q_index[:n] = query_start_loc[decode]
        out_index = np.full(rows, num_tokens, dtype=np.int64)
        out_index[:n] = query_start_loc[decode]
        req_index = np.zeros(rows, dtype=np.int64)
        req_index[:n] = decode
        mask = np.zeros((rows, 1, keys), dtype=bool)
        mask[:n, 0] = np.arange(keys)[None, :] < seq_lens[decode][:, None]
        mask[n:, 0, 0] = True  # padding rows attend to key 0: their softmax stays finite
        groups.append(dict(batch=rows, queries=1, keys=keys, q_index=q_index, out_index=out_index,
                           req_index=req_index, mask=mask))
    for i in many:
        q_len, start = int(query_lens[i]), int(query_start_loc[i])
        queries = bucket(q_len)
        q = np.arange(queries)
        real = q < q_len
        q_index = np.where(real, start + q, start)
        out_index = np.where(real, start + q, num_tokens)
        if causal:
            keys = key_blocks(seq_lens[i], block_size, width) * block_size
            mask = np.arange(keys)[None, :] <= context[i] + q[:, None]
        else:
            keys = queries
            mask = np.broadcast_to(np.arange(keys)[None, :] < q_len, (queries, keys))
        mask = mask | ((~real)[:, None] & (np.arange(keys) == 0)[None, :])
        groups.append(dict(batch=1, queries=queries, keys=keys, q_index=q_index, out_index=out_index,
                           req_index=np.array([i], dtype=np.int64) if causal else None,
                           mask=np.ascontiguousarray(mask[None])))
    return groups


def _whole_table(table: torch.Tensor) -> torch.Tensor:
    """The block table buffer that ``table`` (its first rows) views, all of
    its rows, so that gathers from it have one shape whatever the step's
    request count; ``table`` itself when it is not such a view."""
    if table.dim() != 2 or table.stride(1) != 1 or table.stride(0) != table.shape[1] or table.shape[1] == 0:
        return table
    available = table.untyped_storage().nbytes() // table.element_size() - table.storage_offset()
    rows = available // table.shape[1]
    if rows <= table.shape[0]:
        return table
    return table.as_strided((rows, table.shape[1]), table.stride(), table.storage_offset())


class TpuAttentionMetadataBuilder(AttentionMetadataBuilder[TpuAttentionMetadata]):
    def __init__(self, kv_cache_spec: AttentionSpec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        self.encoder_only = isinstance(kv_cache_spec, EncoderOnlyAttentionSpec)
        scheduler = vllm_config.scheduler_config
        self.max_num_batched_tokens = scheduler.max_num_batched_tokens
        self.max_decode_rows = bucket(scheduler.max_num_seqs)
        # Causal attention runs inside the model's program (attention_in_graph.py).
        self.in_graph = in_graph_enabled(vllm_config)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata, fast_build: bool = False):
        m = common_attn_metadata
        real_reqs = m.num_reqs
        query_start_loc = m.query_start_loc_cpu[: real_reqs + 1].numpy().astype(np.int64)
        host_seq_lens = m.seq_lens_cpu_upper_bound
        if host_seq_lens is None:
            host_seq_lens = m.seq_lens.cpu()
        seq_lens = host_seq_lens[:real_reqs].numpy().astype(np.int64)
        causal = bool(m.causal) if not isinstance(m.causal, torch.Tensor) else True
        causal = causal and not self.encoder_only
        num_tokens = padded_token_count(m.num_actual_tokens, self.max_num_batched_tokens)
        if causal and self.in_graph:
            rows = plan_token_rows(query_start_loc, seq_lens, num_tokens)
            table = _whole_table(m.block_table_tensor)
            blocks = in_graph_key_blocks(num_tokens, int(seq_lens.max(initial=1)), self.block_size, table.shape[1],
                                         self.max_decode_rows)
            return TpuAttentionMetadata(
                num_actual_tokens=m.num_actual_tokens, num_tokens=num_tokens,
                block_table=table[:, :blocks], slot_mapping=m.slot_mapping, groups=[],
                token_rows=torch.from_numpy(rows).to(self.device))
        return host_metadata(query_start_loc, seq_lens, m.num_actual_tokens, num_tokens,
                             m.block_table_tensor if causal else None, m.slot_mapping, self.block_size,
                             self.max_decode_rows)


def host_metadata(query_start_loc: np.ndarray, seq_lens: np.ndarray, num_actual_tokens: int, num_tokens: int,
                  block_table: torch.Tensor | None, slot_mapping: torch.Tensor, block_size: int,
                  max_decode_rows: int) -> TpuAttentionMetadata:
    """A step's metadata from its host-side lengths (``plan_groups``); the
    group tensors are copied to the device of ``slot_mapping``. No block
    table: encoder-only attention."""
    causal = block_table is not None
    table = _whole_table(block_table) if causal else None
    device = slot_mapping.device
    groups = []
    for g in plan_groups(query_start_loc, seq_lens, num_tokens, block_size, table.shape[1] if causal else 0,
                         max_decode_rows, causal):
        groups.append(AttentionGroup(
            batch=g["batch"], queries=g["queries"], keys=g["keys"],
            q_index=torch.from_numpy(g["q_index"]).to(device),
            out_index=torch.from_numpy(g["out_index"]).to(device),
            req_index=None if g["req_index"] is None else torch.from_numpy(g["req_index"]).to(device),
            mask=torch.from_numpy(g["mask"]).to(device),
        ))
    return TpuAttentionMetadata(num_actual_tokens=num_actual_tokens, num_tokens=num_tokens, block_table=table,
                                slot_mapping=slot_mapping, groups=groups)


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
        write_kv(key, value, kv_cache, slot_mapping)

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale=None, output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("tpu attention has no fused output quantization")
        if attn_metadata is None:  # profiling run
            return output.fill_(0)
        m = attn_metadata
        t = m.num_tokens
        if query.shape[0] != t:
            raise RuntimeError(f"tpu attention: the step has {query.shape[0]} token rows, its metadata {t}")
        if m.token_rows is not None:
            attend(query, None, kv_cache, m.token_rows, m.block_table, output, self.scale)
            return output
        d, h, hkv = self.head_size, self.num_heads, self.num_kv_heads
        group = h // hkv
        encoder = self.attn_type == AttentionType.ENCODER_ONLY
        # Row t takes the padding rows of every group.
        out = torch.zeros(t + 1, h * d, dtype=torch.float32, device=query.device)
        for g in m.groups:
            b, nq, nk = g.batch, g.queries, g.keys
            q = query.index_select(0, g.q_index).view(b, nq, hkv, group, d)
            q = q.permute(0, 2, 3, 1, 4).reshape(b, hkv, group * nq, d)
            if encoder:  # keys are the request's own tokens: [b, hkv, nq, d]
                k = key.index_select(0, g.q_index).view(b, nq, hkv, d).transpose(1, 2)
                v = value.index_select(0, g.q_index).view(b, nq, hkv, d).transpose(1, 2)
            else:
                bs = kv_cache.shape[2]
                blocks = m.block_table.index_select(0, g.req_index)[:, : nk // bs].to(torch.int64)
                kv = kv_cache[blocks]  # [b, blocks, hkv, bs, 2d]
                kv = kv.permute(0, 2, 1, 3, 4).reshape(b, hkv, nk, 2 * d)
                k, v = kv[..., :d], kv[..., d:]
            scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * self.scale
            scores = scores.view(b, hkv, group, nq, nk).masked_fill(~g.mask[:, None, None], float("-inf"))
            probs = torch.softmax(scores, dim=-1).view(b, hkv, group * nq, nk)
            res = torch.matmul(probs, v.float()).view(b, hkv, group, nq, d)
            out.index_copy_(0, g.out_index, res.permute(0, 3, 1, 2, 4).reshape(b * nq, h * d))
        output.copy_(out[:t].view(output.shape).to(output.dtype))
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
