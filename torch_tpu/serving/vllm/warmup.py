"""Warm-up steps for the tpu model runner: real steps (vLLM's
``execute_model`` then ``sample_tokens``) over made-up requests, chosen so
that every shape serving can give a tpu program is built before the first
request.

The shapes of a step (model_runner.py, attention.py) depend on:
- the padded token count ``T`` (compiled model pieces, logits rows and the
  sampler: ``padded_num_reqs(T)`` rows);
- for the decode group (requests with one query): ``T`` and its key blocks;
- for each prefill group: ``T``, its query bucket and its key blocks;
- the sampler's kind: all greedy, sampled or seeded, with or without
  logprobs (``sampling_plan``).
``plan_steps`` lists steps, each a list of ``(queries, sequence length)``
requests, that cover every feasible ``(T, decode key blocks)``, every
``(T, query bucket)`` and every ``(query bucket, key blocks)``, with and
without logprobs per ``T``. Made-up requests point every KV block at block 0,
vLLM's null block, which no real request reads.
"""

from .attention import bucket, key_blocks, padded_token_count


def bucket_sizes(limit: int) -> list[int]:
    """1, 2, 4, ... below limit, then limit."""
    sizes = [1]
    while sizes[-1] < limit:
        sizes.append(min(sizes[-1] * 2, limit))
    return sizes


def _powers(limit: int) -> list[int]:
    """1, 2, 4, ... up to limit."""
    return [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]


def plan_steps(max_tokens: int, max_reqs: int, max_model_len: int, block_size: int) -> list[list[tuple[int, int]]]:
    """Warm-up steps for a runner with these limits; each step is a list of
    ``(queries, sequence length)`` requests whose token count pads to one
    bucket and whose request count is at most max_reqs."""
    width = -(-max_model_len // block_size)
    # A step's sequence is at most max_model_len - 1 tokens long: the token
    # sampled after it is the request's last.
    longest = max_model_len - 1
    block_counts = sorted({key_blocks(s, block_size, width) for s in range(1, longest + 1)})

    def seq_for(blocks: int, at_least: int) -> int | None:
        """The shortest sequence of at least at_least tokens reading ``blocks`` key blocks."""
        for s in range(max(1, at_least), longest + 1):
            if key_blocks(s, block_size, width) == blocks:
                return s
        return None

    def kq_options(q: int) -> list[int]:
        return [b for b in block_counts if seq_for(b, q) is not None]

    steps, covered_core = [], set()

    def make(total: int, probe_q: int | None, probe_blocks: int | None, decode_blocks: int | None):
        reqs = []
        if probe_q is not None:
            reqs.append((probe_q, seq_for(probe_blocks, probe_q)))
        if decode_blocks is not None:
            reqs.append((1, seq_for(decode_blocks, 1)))
        left = total - sum(q for q, _ in reqs)
        while left > 0 and len(reqs) < max_reqs:
            q = min(left, longest)
            reqs.append((q, q))
            left -= q
        tokens = sum(q for q, _ in reqs)
        if left > 0 or padded_token_count(tokens, max_tokens) != total:
            return None
        for q, s in reqs:
            if q > 1:
                covered_core.add((bucket(q), key_blocks(s, block_size, width)))
        return reqs

    for total in bucket_sizes(max_tokens):
        # One probe per query bucket: its largest count that fits the step.
        queries = [min(b, total, longest) for b in _powers(bucket(total))]
        queries = [q for i, q in enumerate(queries) if q >= 2 and bucket(q) == _powers(bucket(total))[i]]
        decodes = list(block_counts) if total <= max_reqs or max_reqs > 1 else []
        mine = []
        turn = 0
        while queries or decodes:
            q = queries.pop() if queries else None
            kd = decodes.pop(0) if decodes and (q is None or q < total) else None
            kq = None
            if q is not None:
                options = kq_options(q)
                fresh = [b for b in options if (bucket(q), b) not in covered_core]
                kq = (fresh or options)[turn % len(fresh or options)]
            turn += 1
            step = make(total, q, kq, kd)
            if step is None and kd is not None and q is not None:
                step = make(total, q, kq, None)
                decodes.insert(0, kd)
            if step is None and q is None:
                # Decodes only: total one-token requests, when max_reqs allows.
                if total <= max_reqs and padded_token_count(total, max_tokens) == total:
                    seq = seq_for(kd, 1)
                    step = [(1, seq)] * total
            if step is not None:
                mine.append(step)
        if len(mine) == 1:  # each token count with and without logprobs
            mine.append(mine[0])
        steps.extend(mine)
    # (query bucket, key blocks) pairs that no step above reached.
    for b in _powers(bucket(min(max_tokens, longest))):
        q = min(b, max_tokens, longest)
        if q < 2 or bucket(q) != b:
            continue
        for kq in kq_options(q):
            if (q, kq) not in covered_core:
                step = make(padded_token_count(q, max_tokens), q, kq, None)
                if step is not None:
                    steps.append(step)
    return steps


# Sampling kinds a step's sampler programs depend on (model_runner.py's
# _sample makes every other option uniform): all greedy, or some request
# sampled (temperature, top-k, top-p), or some request seeded; each with and
# without logprobs. Planned steps run greedy; each token count's first step
# runs again with every other kind.
SAMPLED_KINDS = ("sampled", "seeded")


def sampling_plan(steps, max_tokens: int) -> list[tuple[list[tuple[int, int]], str, bool]]:
    """``(step, kind, logprobs)`` for every planned step (greedy, every
    other one with logprobs) and, for each token count's first step, every
    sampled kind with and without logprobs."""
    plan, seen = [], set()
    for n, step in enumerate(steps):
        plan.append((step, "greedy", bool(n % 2)))
        total = padded_token_count(sum(q for q, _ in step), max_tokens)
        if total not in seen:
            seen.add(total)
            plan.extend((step, kind, logprobs) for kind in SAMPLED_KINDS for logprobs in (False, True))
    return plan


def _params(kind: str, logprobs: bool, first: bool):
    from vllm.sampling_params import SamplingParams

    lp = 1 if logprobs else None
    if kind == "greedy":
        return SamplingParams(temperature=0.0, max_tokens=1, logprobs=lp)
    # The first request sampled (seeded for "seeded"), the others greedy:
    # rows with and without a generator, greedy and sampled, in one step.
    if not first:
        return SamplingParams(temperature=0.0, max_tokens=1, logprobs=lp)
    return SamplingParams(temperature=0.7, top_k=5, top_p=0.9, max_tokens=1, logprobs=lp,
                          seed=1 if kind == "seeded" else None)


def run_steps(runner, steps) -> None:
    """Runs the planned steps through the runner as made-up requests, in
    every sampling kind (sampling_plan), then removes them."""
    from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput

    block_size = runner.cache_config.block_size
    finished: set[str] = set()
    for n, (step, kind, logprobs) in enumerate(sampling_plan(steps, runner.scheduler_config.max_num_batched_tokens)):
        new, scheduled = [], {}
        for i, (queries, seq_len) in enumerate(step):
            req_id = f"tpu-warmup-{n}-{i}"
            params = _params(kind, logprobs, i == 0)
            new.append(NewRequestData(
                req_id=req_id, prompt_token_ids=[0] * seq_len, mm_features=[], sampling_params=params,
                pooling_params=None, block_ids=([0] * -(-seq_len // block_size),),
                num_computed_tokens=seq_len - queries, lora_request=None))
            scheduled[req_id] = queries
        output = SchedulerOutput(
            scheduled_new_reqs=new, scheduled_cached_reqs=CachedRequestData.make_empty(),
            num_scheduled_tokens=scheduled, total_num_scheduled_tokens=sum(scheduled.values()),
            scheduled_spec_decode_tokens={}, scheduled_encoder_inputs={}, finished_req_ids=finished,
            free_encoder_mm_hashes=[])
        if runner.execute_model(output) is None:
            runner.sample_tokens(None)
        finished = set(scheduled)
    done = SchedulerOutput.make_empty()
    done.finished_req_ids = finished
    runner.execute_model(done)
    # vLLM's attention metadata fills the block table rows between the
    # step's requests and its padded request count with the null block:
    # an empty slice at each request count (a program per slice offset).
    from vllm.v1.utils import copy_slice
    from vllm.v1.worker.gpu_model_runner import NULL_BLOCK_ID

    for table in runner.input_batch.block_table.block_tables:
        for n in range(1, runner.scheduler_config.max_num_seqs + 1):
            table.block_table.gpu[n:n].fill_(NULL_BLOCK_ID)
    # vLLM's input batch copies temperature, top-p and top-k of its first n
    # requests to the device when its requests change (a program per n).
    batch = runner.input_batch
    for n in range(1, runner.scheduler_config.max_num_seqs + 1):
        for host, device in ((batch.temperature_cpu_tensor, batch.temperature),
                             (batch.top_p_cpu_tensor, batch.top_p), (batch.top_k_cpu_tensor, batch.top_k)):
            copy_slice(host, device, n)
