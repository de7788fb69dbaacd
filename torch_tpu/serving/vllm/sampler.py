"""vLLM's top-k/top-p sampler on tpu with shapes that depend only on the
padded row count, so that the warm-up (warmup.py) builds every program
sampling can run.

vLLM's native sampler draws the noise of each seeded request into a view of
the noise tensor (``q[i].exponential_(generator=...)``): on tpu a write
through a view at row offset ``i`` is a program per (rows, i). Here the
noise of every row is drawn at once, and each seeded row's own ``[vocab]``
draw (with the request's generator) is copied into it by ``index_copy_``
with the row index as a device tensor: one program per row count, whichever
the row."""

import torch
from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler, apply_top_k_top_p_pytorch

# (device, row) -> a [1] int64 tensor holding row, on that device.
_row_indices: dict[tuple[torch.device, int], torch.Tensor] = {}


def _row_index(device: torch.device, row: int) -> torch.Tensor:
    key = (device, row)
    if key not in _row_indices:
        _row_indices[key] = torch.tensor([row], dtype=torch.int64).to(device)
    return _row_indices[key]


def exponential_noise(probs: torch.Tensor, generators: dict[int, torch.Generator]) -> torch.Tensor:
    """Exponential(1) noise shaped like probs; row i drawn with generators[i]
    when present (so a seeded request's tokens repeat), else with the
    default generator."""
    noise = torch.empty_like(probs).exponential_()
    rows, vocab = probs.shape
    for i, generator in generators.items():
        if i < rows:
            row = torch.empty(1, vocab, dtype=probs.dtype, device=probs.device).exponential_(generator=generator)
            noise.index_copy_(0, _row_index(probs.device, i), row)
    return noise


class TpuTopKTopPSampler(TopKTopPSampler):
    """Top-k and top-p masking by sorting (no host sync, one shape per row
    count), then sampling by exponential noise (``exponential_noise``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # TopKTopPSampler picks its implementation per instance.
        self.forward = self.forward_tpu

    def forward_tpu(self, logits, generators, k, p):
        logits = apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=False)
        processed = None
        if self.logprobs_mode == "processed_logits":
            processed = logits
        elif self.logprobs_mode == "processed_logprobs":
            processed = logits.log_softmax(dim=-1, dtype=torch.float32)
        probs = logits.softmax(dim=-1, dtype=torch.float32)
        q = exponential_noise(probs, generators)
        return probs.div(q).argmax(dim=-1).view(-1), processed
