"""vLLM's top-k/top-p sampler on tpu with shapes that depend only on the
padded row count, so that the warm-up (warmup.py) builds every program
sampling can run.

vLLM's native sampler draws the noise of each seeded request into a view of
the noise tensor (``q[i].exponential_(generator=...)``): on tpu a write
through a view at row offset ``i`` is a program per (rows, i). Here every
row's noise is drawn into a fresh ``[vocab]`` tensor (with the request's
generator where it has one) and the rows are stacked: one program for the
draw, one stack per row count."""

import torch
from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler, apply_top_k_top_p_pytorch


def exponential_noise(probs: torch.Tensor, generators: dict[int, torch.Generator]) -> torch.Tensor:
    """Exponential(1) noise shaped like probs; row i drawn with generators[i]
    when present (so a seeded request's tokens repeat), else with the
    default generator."""
    if not generators:
        return torch.empty_like(probs).exponential_()
    rows, vocab = probs.shape
    return torch.stack([
        torch.empty(vocab, dtype=probs.dtype, device=probs.device).exponential_(generator=generators.get(i))
        for i in range(rows)])


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
