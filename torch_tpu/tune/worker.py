"""Measures one candidate in this (fresh) process and prints one line,
"TUNE_RESULT <json>", on stdout. The tuner starts one per measurement:

    python -m torch_tpu.tune.worker '<spec json>'

spec: {"workload": source (workload.describe), "candidate": {knob: value},
"hooks": {knob: "module:function"}, "sample_s": seconds of timed steps,
"min_steps", "max_steps", "max_warmup"}.

Warm-up is excluded: steps run untimed until one compiles nothing (no XLA
compile and no persistent-cache load; with LENGTHS, a whole pass over the
lengths), at least two and at most max_warmup. Then steps are timed one by
one, each waited on (torch.tpu.synchronize()), for sample_s seconds (between
min_steps and max_steps); the step time is their lower quartile. Reported:
the step times, first_step_s (compile included), settle_s (the warm-up's time beyond as many steady steps: tracing
and compiling), peak device memory, the check values of the first steps (for
the numerics comparison) and the CPU fallbacks.
"""
import json
import sys
import time
import traceback


def _programs_built(torch_tpu):
    info = torch_tpu.cache_info()
    return info.get("compiles", 0) + info.get("disk_hits", 0)


def _prepare(candidate, hooks):
    import torch
    import torch_tpu

    from . import space

    mode = candidate.get("mode", "fused")
    if mode not in space.MODES:
        raise ValueError(f"unknown mode {mode!r}")
    torch.set_float32_matmul_precision(candidate.get("matmul_precision", "highest"))
    if "shape_buckets" in candidate:
        import torch_tpu.compiler
        torch_tpu.compiler.set_shape_buckets(candidate["shape_buckets"])
    space.apply_hooks(candidate, hooks)
    torch_tpu.set_eager_mode(space.eager_mode(mode))
    return torch, torch_tpu, mode


def _wrap(step, mode, torch, torch_tpu, dynamic):
    if mode == "compile":
        import torch_tpu.compiler
        torch_tpu.compiler.register()
        step.fn = torch.compile(step.fn, backend="tpu", dynamic=dynamic or None)
    elif mode == "trainstep":
        if not step.trainable:
            raise ValueError("mode 'trainstep' needs a training workload (loss_fn and an optimizer)")
        import torch_tpu.compiler
        torch_tpu.compiler.register()
        kwargs = {"dynamic": True} if dynamic else {}
        step.fn = torch_tpu.TrainStep(step.model, step.loss_fn, step.optimizer, **kwargs)


def measure(spec):
    candidate, hooks = spec["candidate"], spec.get("hooks", {})
    torch, torch_tpu, mode = _prepare(candidate, hooks)
    from . import padding, workload

    t0 = time.perf_counter()
    torch.manual_seed(0)
    step, info = workload.load(spec["workload"], "tpu", candidate.get("batch_size"))
    from .._internal.utils.hardware import plugin_platform
    info["plugin"] = plugin_platform()
    result = {"info": info, "tokens": step.tokens}
    if info["form"] == "model" and step.model is not None:
        result["pad_sizes"] = padding.sizes_to_pad(step.model)
    if step.model is not None:
        result["param_bytes"] = sum(p.numel() * p.element_size() for p in step.model.parameters())
        if candidate.get("pad"):
            result["padded"] = {str(k): v for k, v in padding.pad_model(step.model).items()}
    _wrap(step, mode, torch, torch_tpu, dynamic=bool(info.get("lengths")))
    result["build_s"] = time.perf_counter() - t0
    torch.tpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    torch_tpu.reset_fallback_ops()

    cycle = len(step.batches) if step.batches else 1
    i, checks, warm_times = 0, [], []
    first = True
    max_warmup = spec.get("max_warmup", 12) * cycle
    while True:  # warm-up, one pass over the lengths at a time
        built = _programs_built(torch_tpu)
        t = time.perf_counter()
        for _ in range(cycle):
            out = step.run(i)
            torch.tpu.synchronize()
            if len(checks) < spec.get("check_steps", 3):
                checks.append(step.check_value(out))
            i += 1
        warm_times.append(time.perf_counter() - t)
        if first:
            result["first_step_s"] = warm_times[0] / cycle
            first = False
        if (len(warm_times) >= 2 and _programs_built(torch_tpu) == built) or i >= max_warmup:
            break
    result["warmup_steps"] = i
    built = _programs_built(torch_tpu)

    times, t_end = [], time.perf_counter() + spec.get("sample_s", 1.0)
    min_steps, max_steps = spec.get("min_steps", 5) * cycle, spec.get("max_steps", 200) * cycle
    while len(times) < max_steps and (len(times) < min_steps or time.perf_counter() < t_end):
        t = time.perf_counter()
        step.run(i)
        torch.tpu.synchronize()
        times.append(time.perf_counter() - t)
        i += 1
    # The lower quartile: another process's load only ever adds time to a
    # step, so on a shared machine it is the steadier figure of the step's own
    # cost (the spread around it is stated as noise).
    steady = sorted(times)[len(times) // 4]
    result.update(
        status="ok", step_times=times, step_s=steady,
        settle_s=max(0.0, sum(warm_times) - len(warm_times) * cycle * steady),
        peak_bytes=torch.tpu.max_memory_allocated(), checks=checks,
        fallback_ops=dict(torch_tpu.fallback_ops()),
        compiles_timed=_programs_built(torch_tpu) - built)
    try:
        result["memory_limit_bytes"] = torch.tpu.mem_get_info()[1]
    except Exception:  # a plugin without a capacity figure: no limit known
        result["memory_limit_bytes"] = None
    return result


def _layout_wrap(kind):
    """The model's wrapper for a layout: DDP, or FSDP2 over each child with
    parameters and then the root."""
    import torch
    from torch.distributed.fsdp import fully_shard

    def ddp(model):
        return torch.nn.parallel.DistributedDataParallel(model)

    def fsdp(model):
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child)
        return fully_shard(model)
    return ddp if kind == "ddp" else fsdp


def measure_layout(spec):
    """The training step over N in-process ranks (launch_in_process, rank r
    on tpu:r), each with the global batch's 1/N share, in the candidate's
    eager mode (launch_in_process runs the ranks strict). Every rank runs the same steps: warm-up until no rank built a
    program in its last step (at least two, at most max_warmup), then
    `layout_steps` timed ones; the step time is rank 0's lower quartile."""
    import torch.distributed as dist

    candidate = spec["candidate"]
    torch, torch_tpu, mode = _prepare(candidate, spec.get("hooks", {}))
    from . import space, workload
    from ..distributed import launch_in_process

    kind, n = space.parse_layout(candidate["layout"])
    if mode not in ("strict", "fused"):
        raise ValueError(f"a layout is measured in eager mode (strict or fused), not {mode!r}")
    _, info = workload.load(spec["workload"], "cpu", candidate.get("batch_size"))
    if not info["training"] or info["form"] != "model":
        raise ValueError("a layout needs a training workload in the model form (make_model, make_batch, loss_fn)")
    if info["batch_size"] % n:
        raise ValueError(f"the batch ({info['batch_size']}) does not split over {n} devices")
    per_rank = info["batch_size"] // n
    steps = spec.get("layout_steps", 20)
    max_warmup = spec.get("max_warmup", 12)

    def rank_main(rank, world):
        # The rank threads share torch's CPU generator, so their initial
        # weights may differ: DDP starts from rank 0's, FSDP2 from each
        # rank's own shard. The figure is the step's time, not its loss.
        step, _ = workload.load(spec["workload"], f"tpu:{rank}", per_rank, wrap=_layout_wrap(kind))
        device = torch.device("tpu", rank)
        t0, i = time.perf_counter(), 0
        while True:  # warm-up until a step builds nothing on any rank (decided together: same steps everywhere)
            built = _programs_built(torch_tpu)
            step.run(i)
            torch.tpu.synchronize()
            i += 1
            dist.barrier()
            more = torch.tensor([float(_programs_built(torch_tpu) != built)], device=device)
            dist.all_reduce(more, op=dist.ReduceOp.MAX)
            if (i >= 2 and not more.item()) or i >= max_warmup:
                break
        warm = time.perf_counter() - t0
        dist.barrier()
        torch.tpu.reset_peak_memory_stats()
        times = []
        for k in range(steps):
            t = time.perf_counter()
            step.run(i + k)
            torch.tpu.synchronize()
            times.append(time.perf_counter() - t)
        return {"times": times, "warm_s": warm, "warmup_steps": i, "tokens": step.tokens,
                "peak_bytes": torch.tpu.max_memory_allocated()}

    t0 = time.perf_counter()
    ranks = launch_in_process(rank_main, n)
    r0 = ranks[0]
    steady = sorted(r0["times"])[len(r0["times"]) // 4]
    return {"status": "ok", "info": {**info, "batch_size": per_rank, "world_size": n}, "tokens": r0["tokens"] * n,
            "step_times": r0["times"], "step_s": steady, "checks": [],
            "settle_s": max(0.0, r0["warm_s"] - r0["warmup_steps"] * steady), "warmup_steps": r0["warmup_steps"],
            "peak_bytes": max(r["peak_bytes"] for r in ranks), "build_s": time.perf_counter() - t0,
            "fallback_ops": dict(torch_tpu.fallback_ops())}


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m torch_tpu.tune.worker '<spec json>'")
    spec = json.loads(sys.argv[1])
    try:
        result = measure_layout(spec) if "layout" in spec["candidate"] else measure(spec)
    except Exception as e:  # reported to the tuner with its reason; the tuner goes on
        traceback.print_exc()
        kind = "oom" if "out of memory" in str(e).lower() or "RESOURCE_EXHAUSTED" in str(e) else "failed"
        result = {"status": kind, "reason": f"{type(e).__name__}: {e}"[:1500]}
    print("TUNE_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
