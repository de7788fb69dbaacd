"""Plain-PyTorch versions of the Triton kernels vLLM's model runner launches
while it prepares a step; they run on tpu like any other op. Registered through
``Platform.register_triton_kernel_overrides`` (``vllm.triton_utils.dispatcher``)."""

import torch


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
    for the step's tokens, ``PAD_ID`` for the rest of ``slot_mapping``."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("context parallelism is not supported on tpu")
    device = slot_mapping_ptr.device
    slot_mapping_ptr[num_tokens:max_num_tokens].fill_(PAD_ID)
    if num_tokens == 0:
        return
    token = torch.arange(num_tokens, device=device, dtype=torch.int64)
    # A token's request: how many requests end at or before it. Entries of
    # query_start_loc past the last request are >= num_tokens.
    ends = query_start_loc_ptr[1:].to(torch.int64)
    req = (ends[None, :] <= token[:, None]).to(torch.int64).sum(dim=1)
    pos = positions_ptr[:num_tokens].to(torch.int64)
    block_index = torch.div(pos, KV_CACHE_BLOCK_SIZE, rounding_mode="floor")
    flat = block_table_ptr.reshape(-1)
    block = flat[req * block_table_stride + block_index].to(torch.int64)
    slot_mapping_ptr[:num_tokens].copy_(block * KV_CACHE_BLOCK_SIZE + (pos - block_index * KV_CACHE_BLOCK_SIZE))


OVERRIDES = {
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping,
}
