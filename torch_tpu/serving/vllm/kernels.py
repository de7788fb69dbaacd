"""Plain-PyTorch versions of the Triton kernels vLLM's model runner launches
while it prepares a step; they run on tpu like any other op. Registered through
``Platform.register_triton_kernel_overrides`` (``vllm.triton_utils.dispatcher``)."""

import torch


def _whole_buffer(view: torch.Tensor, length: int):
    """``view`` (a 1-D prefix of one of vLLM's persistent step buffers)
    widened to ``length`` elements of the same buffer, or None when its
    storage is shorter. Fixed shapes make one program serve every step."""
    if view.dim() != 1 or view.stride(0) != 1:
        return None
    available = view.untyped_storage().nbytes() // view.element_size() - view.storage_offset()
    if available < length:
        return None
    return view.as_strided((length,), (1,), view.storage_offset())


def compute_slot_mapping(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,
    positions_ptr,
    block_table_ptr,
    block_table_stride,
    slot_mapping_ptr,
    KV_CACHE_BLOCK_SIZE,
    TOTAL_CP_WORLD_SIZE=1,
    TOTAL_CP_RANK=0,
    CP_KV_CACHE_INTERLEAVE_SIZE=1,
    PAD_ID=-1,
    BLOCK_SIZE=None,
):
    """slot[t] = block_table[req(t), pos(t) // block] * block + pos(t) % block
    for the step's tokens, ``PAD_ID`` for the rest of ``slot_mapping``.

    vLLM passes ``query_start_loc`` and ``positions`` as prefixes
    ([requests + 1], [tokens]) of its persistent buffers, so their shapes
    change from step to step. The slots are computed over the whole buffers
    instead (max_num_reqs + 1 and max_num_tokens entries: vLLM sets the
    entries of query_start_loc past the last request to num_tokens before
    this runs, and the slots of positions past num_tokens are replaced by
    PAD_ID), so the same programs serve every step; buffers too short for
    that are read at the step's sizes."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("context parallelism is not supported on tpu")
    device = slot_mapping_ptr.device
    # block_table_ptr: [max_num_reqs, blocks], so query_start_loc's buffer
    # holds max_num_reqs + 1 entries.
    starts = _whole_buffer(query_start_loc_ptr, block_table_ptr.shape[0] + 1)
    positions = _whole_buffer(positions_ptr, max_num_tokens)
    n = max_num_tokens if positions is not None and starts is not None else num_tokens
    if n == num_tokens:
        positions, starts = positions_ptr, query_start_loc_ptr
        slot_mapping_ptr[num_tokens:max_num_tokens].fill_(PAD_ID)
        if num_tokens == 0:
            return
    token = torch.arange(n, device=device, dtype=torch.int64)
    # A token's request: how many requests end at or before it.
    ends = starts[1:].to(torch.int64)
    req = (ends[None, :] <= token[:, None]).to(torch.int64).sum(dim=1)
    pos = positions[:n].to(torch.int64)
    block_index = torch.div(pos, KV_CACHE_BLOCK_SIZE, rounding_mode="floor")
    flat = block_table_ptr.reshape(-1)
    # Padding tokens may point anywhere; their slots are replaced below.
    index = (req * block_table_stride + block_index).clamp(0, flat.numel() - 1)
    slots = flat[index].to(torch.int64) * KV_CACHE_BLOCK_SIZE + (pos - block_index * KV_CACHE_BLOCK_SIZE)
    if n != num_tokens:
        real = (torch.arange(n) < num_tokens).to(device)  # built on the host: no per-size program
        slots = torch.where(real, slots, torch.full_like(slots, PAD_ID))
    slot_mapping_ptr[:n].copy_(slots)


OVERRIDES = {
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping,
}
