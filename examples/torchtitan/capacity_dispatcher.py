"""Expert-parallel token dispatch whose every shape is fixed by the config.

TorchTitan's `AllToAllTokenDispatcher` sends each EP rank exactly the rows routed
to its experts: it copies the per-expert token counts to the host (`.tolist()`)
and runs an all_to_all with uneven splits, so the row count R after dispatch,
the grouped matmuls, the permutes and the all_to_all sizes change every step and
differ between ranks. On tpu every new shape is a new XLA program, so each step
built new programs and ranks fell out of step (issue 27).

`CapacityAllToAllTokenDispatcher` gives every tensor a shape that depends only on
the batch: each rank sends every EP rank a block of capacity C = T*K rows (T
local tokens, K = top_k: the most rows one rank can route to another, so no token
is ever dropped), its real rows first and zero rows after. The all_to_all then
has equal splits (no host copy of counts, no uneven sizes), and the receiver
orders its EP*C rows expert-major with the zero rows last. `torch._grouped_mm`
takes the exact per-expert counts as offsets; rows past the last offset are
outside every group (zero outputs, zero weight gradients), so the arithmetic on
real rows is TorchTitan's. Cost: EP*C rows of grouped matmul per rank instead of
about C, the price of static shapes (see docs/scaling.md for capacity factors).

It is plain PyTorch (functional collectives, index ops), so it also runs on the
CPU with gloo, whose list all_to_all needs equal sizes.
"""
from dataclasses import dataclass

import torch
from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor
from torchtitan.models.common.token_dispatcher import (
    AllToAllTokenDispatcher,
    LocalDispatchMetadata,
    LocalTokenDispatcher,
)


@dataclass(frozen=True, kw_only=True)
class CapacityDispatchMetadata(LocalDispatchMetadata):
    """What combine() needs to send expert outputs back (all shapes fixed)."""

    rank_major_rows: torch.Tensor  # (EP*C,) expert-major row of each received rank-major row
    return_rows: torch.Tensor  # (N,) row of the returned (EP*C) block for each sorted local row


def _exclusive_cumsum(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    return torch.cumsum(x, dim=dim) - x


class CapacityAllToAllTokenDispatcher(AllToAllTokenDispatcher):
    """AllToAllTokenDispatcher with a fixed capacity of T*K rows per rank pair."""

    @dataclass(kw_only=True, slots=True)
    class Config(AllToAllTokenDispatcher.Config):
        pass

    def dispatch(self, x_TD, topk_scores_TK, topk_expert_ids_TK, num_local_tokens_per_expert_E):
        if self.ep_mesh is None:  # EP 1: local reorder only, already static
            return LocalTokenDispatcher.dispatch(self, x_TD, topk_scores_TK, topk_expert_ids_TK,
                                                 num_local_tokens_per_expert_E)
        ep = self.ep_mesh.size()
        group = self.ep_mesh.get_group()
        routed_ND, token_indices_N, scores_N = self._local_reorder(x_TD, topk_scores_TK, topk_expert_ids_TK)
        n = routed_ND.shape[0]  # the capacity C: every row this rank routes could go to one rank
        device = routed_ND.device
        experts = num_local_tokens_per_expert_E.numel()
        local_experts = experts // ep
        rows = torch.arange(n, device=device)

        with torch.no_grad():
            counts_E = num_local_tokens_per_expert_E.to(torch.int64)
            # send block r: my sorted rows for rank r's experts, then zero rows.
            send_counts = counts_E.view(ep, local_experts).sum(1)  # (EP,)
            send_starts = _exclusive_cumsum(send_counts)
            send_valid = rows[None, :] < send_counts[:, None]  # (EP, C)
            send_src = torch.where(send_valid, send_starts[:, None] + rows[None, :], 0).reshape(-1)
            # Each source's counts for my local experts: (EP, e), row s from rank s.
            recv_counts = wait_tensor(all_to_all_single_autograd(
                counts_E.view(ep, local_experts).contiguous(), None, None, group)).view(ep, local_experts)
            # Received row (s, j) belongs to local expert l(s, j); expert-major destination.
            ends = torch.cumsum(recv_counts, dim=1)  # (EP, e)
            expert_of = (rows[None, None, :] >= ends[:, :, None]).sum(1)  # (EP, C), e where padding
            recv_valid = expert_of < local_experts
            expert_of = expert_of.clamp(max=local_experts - 1)
            in_start = (ends - recv_counts).gather(1, expert_of)  # (EP, C)
            out_start = _exclusive_cumsum(recv_counts.t().reshape(-1)).view(local_experts, ep).t()  # (EP, e)
            dest_valid = out_start.gather(1, expert_of) + rows[None, :] - in_start
            totals = ends[:, -1]  # (EP,) real rows from each source
            pad_before = _exclusive_cumsum(n - totals)  # padding rows of earlier sources
            dest_pad = totals.sum() + pad_before[:, None] + rows[None, :] - totals[:, None]
            rank_major_rows = torch.where(recv_valid, dest_valid, dest_pad).reshape(-1)  # a permutation
            expert_major_src = torch.empty_like(rank_major_rows).scatter_(
                0, rank_major_rows, torch.arange(ep * n, device=device))
            # For combine: sorted row i went to rank r(i), slot i - start(r).
            send_ends = send_starts + send_counts
            owner = (rows[None, :] >= send_ends[:, None]).sum(0).clamp(max=ep - 1)  # (C,)
            return_rows = owner * n + rows - send_starts[owner]
            num_tokens_per_local_expert_e = recv_counts.sum(0)

        send_RD = torch.where(send_valid.reshape(-1, 1), routed_ND[send_src], 0.0)
        recv_RD = wait_tensor(all_to_all_single_autograd(send_RD, None, None, group))
        routed_input_RD = recv_RD[expert_major_src]
        metadata = CapacityDispatchMetadata(
            token_indices_experts_sorted_N=token_indices_N, topk_scores_experts_sorted_N=scores_N,
            rank_major_rows=rank_major_rows, return_rows=return_rows)
        return routed_input_RD, num_tokens_per_local_expert_e, metadata

    def combine(self, routed_output_RD, metadata, x_TD):
        if not isinstance(metadata, CapacityDispatchMetadata):
            return LocalTokenDispatcher.combine(self, routed_output_RD, metadata, x_TD)
        rank_major_RD = routed_output_RD[metadata.rank_major_rows]
        back_RD = wait_tensor(all_to_all_single_autograd(rank_major_RD, None, None, self.ep_mesh.get_group()))
        routed_output_ND = back_RD[metadata.return_rows]
        return LocalTokenDispatcher.combine(self, routed_output_ND, metadata, x_TD)


def use_capacity_dispatch(model_config) -> None:
    """Sets every MoE layer of a TorchTitan model config to the capacity dispatcher."""
    for layer in model_config.layers:
        moe = getattr(layer, "moe", None)
        if moe is None:
            continue
        old = moe.routed_experts.token_dispatcher
        moe.routed_experts.token_dispatcher = CapacityAllToAllTokenDispatcher.Config(
            num_experts=old.num_experts, top_k=old.top_k)
