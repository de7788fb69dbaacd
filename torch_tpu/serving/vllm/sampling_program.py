"""A step's sampling as one tpu program.

``sample`` does what vLLM's ``Sampler`` does for plain sampling (greedy,
temperature, top-k, top-p, seeded rows and top logprobs; no penalties or
logits processors, ``model_runner._plain_sampling``), compiled through the
"tpu" backend: one program per row count and kind (all greedy or not, with
logprobs or not), where vLLM's sampler runs about 25 eager programs. The
exponential noise of sampled rows is drawn before the call
(``sampler.exponential_noise``: seeded rows draw from their own generator)
and is an input of the program.
"""

import torch
from vllm.v1.outputs import LogprobsTensors, SamplerOutput
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

from .sampler import exponential_noise

# vLLM's Sampler: a temperature below this samples greedily.
_SAMPLING_EPS = 1e-5
# Row counts x kinds: more compiled variants than Dynamo keeps by default.
_VARIANTS = 256


def supported(logprobs_mode: str) -> bool:
    """Whether ``sample`` gives vLLM's result for this logprobs mode."""
    return logprobs_mode == "raw_logprobs"


def _sample_rows(logits, temperature, top_k, top_p, noise, num_logprobs: int | None):
    """Sampled tokens [R, 1] int32 and, with num_logprobs, vLLM's top
    logprobs (token ids, logprobs, rank of the sampled token). Greedy when
    temperature is None (every row greedy), else per row by temperature."""
    logits = logits.float()
    raw = logits.log_softmax(dim=-1) if num_logprobs is not None else None
    sampled = logits.argmax(dim=-1)
    if temperature is not None:
        scaled = logits / torch.where(temperature < _SAMPLING_EPS, 1.0, temperature).unsqueeze(1)
        scaled = apply_top_k_top_p_pytorch(scaled, top_k, top_p, allow_cpu_sync=False)
        drawn = scaled.softmax(dim=-1, dtype=torch.float32).div(noise).argmax(dim=-1)
        sampled = torch.where(temperature < _SAMPLING_EPS, sampled, drawn)
    logprobs = None
    if num_logprobs is not None:
        top_values, top_ids = torch.topk(raw, num_logprobs, dim=-1)
        token_logprob = raw.gather(-1, sampled.unsqueeze(-1))
        rank = (raw >= token_logprob).sum(-1)
        logprobs = (torch.cat((sampled.unsqueeze(-1), top_ids), dim=1).to(torch.int32),
                    torch.cat((token_logprob, top_values), dim=1), rank)
    return sampled.to(torch.int32).unsqueeze(-1), logprobs


_compiled = None


def sample(logits, temperature, top_k, top_p, generators, num_logprobs: int | None) -> SamplerOutput:
    """vLLM's SamplerOutput for padded logits rows (module docstring).
    temperature, top_k, top_p: [R] each, or all None for an all-greedy step."""
    global _compiled
    if _compiled is None:
        from torch_tpu.compiler import tpu_backend

        _compiled = torch.compile(_sample_rows, backend=tpu_backend, dynamic=False, fullgraph=True)
    noise = None
    if temperature is not None:
        noise = exponential_noise(torch.empty(logits.shape, dtype=torch.float32, device=logits.device), generators)
    with torch._dynamo.config.patch(recompile_limit=_VARIANTS, accumulated_recompile_limit=_VARIANTS * 4):
        tokens, logprobs = _compiled(logits, temperature, top_k, top_p, noise, num_logprobs)
    return SamplerOutput(sampled_token_ids=tokens,
                         logprobs_tensors=None if logprobs is None else LogprobsTensors(*logprobs))
