"""FSDP2 scaling benchmark: a small transformer's training step on tpu_dist
(tpu tensors) against the same step on gloo (CPU tensors), at 1, 2 and 4 ranks.

    python benchmarks/scaling.py                # ranks 1,2,4; 3 warm-up + 10 timed steps
    python benchmarks/scaling.py --ranks 1,2,4,8
    python benchmarks/scaling.py --quick        # ranks 1,2,4; 1 warm-up + 3 timed steps

For each N, one torchrun (python -m torch.distributed.run --nproc-per-node N)
runs this file with --worker. Each worker builds the same model twice: once
sharded with fully_shard over a tpu DeviceMesh (tpu_dist), once over a gloo
group on CPU tensors. The global batch is fixed (GLOBAL_BATCH sequences of SEQ
tokens), so each rank trains on GLOBAL_BATCH/N sequences. Steps of the two
transports alternate (order flipped each step), so load from other processes
hits both alike. Every step starts after a gloo barrier and ends when the
optimizer step is done (tpu: torch.tpu.synchronize()); the step time is the
slowest rank's median over the timed steps.

Communication share: every all_gather_single / reduce_scatter_single that
FSDP2 issues in the last step is recorded (op, shapes, dtype) by wrapping the
two torch.distributed functions; after training the recorded sequence is
replayed alone, blocking, on fresh buffers of the same shapes, and timed the
same way. comm share = replayed collective time / step time. That is the
collective cost with no overlap; the step may hide part of it (the host
transport's write-back is asynchronous), so the share is an upper bound of the
exposed communication.

A second measure of it, by subtraction: the 1-rank run also times the step
at local batches GLOBAL_BATCH/2, /4, /8 (compute alone, no collectives), and
comm share = 1 - t_1rank(GLOBAL_BATCH/N) / t_N (meaningful while N <= cores).

Parameter memory: torch.tpu.max_memory_allocated() after fully_shard (peak
counters reset before): the per-rank sharded parameters plus the largest
module's full parameters in transit while fully_shard moves them; "held" is
memory_allocated() after it (exactly 1/N of the parameters). Both shrink with
N. The training peak (same counter over the steps) is reported next to them.

Model check: the step-time formula of docs/scaling.md,
    t_step = t0 + c * (GLOBAL_BATCH / N)  [compute, / min(1, cores/N)]
             + sum over the step's collectives (alpha + received bytes / beta)
is evaluated with this machine's figures: t0 (per-step cost that does not
shrink with the batch) and c (time per sequence) are a line fit through the
1-rank step times at the four local batches; alpha and beta are a line fit
through all_gather timings of three message sizes in each run ("no fit" where
noise gives no positive slope). The table shows its prediction ("model ms")
and the same compute plus the replayed collectives ("c+replay") next to the
measured step time.

Prints one table and writes benchmarks/results/scaling_<stamp>.json (and
scaling_latest.json).
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import machine, save_results  # noqa: E402
from torchrun_driver import add_arguments, parse_ranks, run_workers  # noqa: E402

TRANSPORTS = ("tpu_dist", "gloo")
RESULT_PREFIX = "SCALING_JSON "
# Model and batch: small enough for a 2-core machine.
VOCAB, DIM, HEADS, LAYERS, SEQ, GLOBAL_BATCH = 512, 128, 4, 4, 64, 8
PROBE_BYTES = (64 * 1024, 256 * 1024, 1024 * 1024)  # all_gather sizes that fit alpha and beta


def step_flops():
    """Matmul FLOPs of one training step (forward + backward = 3x forward)
    over the global batch: 2 per multiply-add; embedding lookup excluded."""
    tokens = GLOBAL_BATCH * SEQ
    per_token_layer = 2 * (3 * DIM * DIM + DIM * DIM + 2 * 4 * DIM * DIM) + 2 * 2 * SEQ * DIM
    return 3 * tokens * (LAYERS * per_token_layer + 2 * DIM * VOCAB)


# ---------------------------------------------------------------- worker side

def worker(args):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard
    import torch_tpu

    dist.init_process_group("tpu_dist")
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    assert GLOBAL_BATCH % n == 0, f"global batch {GLOBAL_BATCH} does not split over {n} ranks"
    local_batch = GLOBAL_BATCH // n

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = torch.nn.LayerNorm(DIM)
            self.qkv = torch.nn.Linear(DIM, 3 * DIM)
            self.proj = torch.nn.Linear(DIM, DIM)
            self.norm2 = torch.nn.LayerNorm(DIM)
            self.up = torch.nn.Linear(DIM, 4 * DIM)
            self.down = torch.nn.Linear(4 * DIM, DIM)

        def forward(self, x, mask):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).reshape(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(DIM // HEADS) + mask, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, DIM))
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, DIM)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
            self.norm = torch.nn.LayerNorm(DIM)
            self.head = torch.nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, tokens, mask):
            x = self.embed(tokens)
            for blk in self.blocks:
                x = blk(x, mask)
            return self.head(self.norm(x))

    recorded = []  # (op, out shape, in shape, dtype) of the step being recorded
    recording = [False]
    real = {"all_gather": dist.all_gather_single, "reduce_scatter": dist.reduce_scatter_single}

    def wrap(op):
        def call(output, input, *a, **k):
            if recording[0] and output.device.type == "tpu":
                recorded.append((op, tuple(output.shape), tuple(input.shape), input.dtype))
            return real[op](output, input, *a, **k)
        return call
    dist.all_gather_single = wrap("all_gather")
    dist.reduce_scatter_single = wrap("reduce_scatter")

    def sync(device):
        if device.type == "tpu":
            torch.tpu.synchronize()

    meshes = {"tpu_dist": init_device_mesh("tpu", (n,)), "gloo": DeviceMesh.from_group(gloo, "cpu")}
    devices = {"tpu_dist": torch.device("tpu"), "gloo": torch.device("cpu")}
    runs = {}
    for t in TRANSPORTS:
        torch.manual_seed(0)
        model = Model()
        n_params = sum(p.numel() for p in model.parameters())
        if t == "tpu_dist":
            torch.tpu.synchronize()
            torch.tpu.reset_peak_memory_stats()
        for blk in model.blocks:
            fully_shard(blk, mesh=meshes[t])
        fully_shard(model, mesh=meshes[t])
        mem = {}
        if t == "tpu_dist":
            torch.tpu.synchronize()
            mem = {"param_bytes_max_allocated": torch.tpu.max_memory_allocated(),
                   "param_bytes_allocated": torch.tpu.memory_allocated()}
            torch.tpu.reset_peak_memory_stats()
        mask = torch.full((SEQ, SEQ), float("-inf")).triu(1).to(devices[t])
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        runs[t] = {"model": model, "opt": opt, "mask": mask, "gen": torch.Generator().manual_seed(1 + rank),
                   "times": [], "losses": [], "mem": mem, "n_params": n_params}

    def step(t, batch=local_batch):
        r, dev = runs[t], devices[t]
        tokens = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=r["gen"])
        dist.barrier(group=gloo)
        t0 = time.perf_counter()
        x = tokens.to(dev)
        logits = r["model"](x[:, :-1], r["mask"])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        loss.backward()
        r["opt"].step()
        r["opt"].zero_grad()
        loss_value = loss.item()
        sync(dev)
        return time.perf_counter() - t0, loss_value

    total = args.warmup + args.steps
    for i in range(total):
        for t in (TRANSPORTS if i % 2 == 0 else TRANSPORTS[::-1]):
            recording[0] = t == "tpu_dist" and i == total - 1
            dt, lv = step(t)
            recording[0] = False
            if i >= args.warmup:
                runs[t]["times"].append(dt)
                runs[t]["losses"].append(lv)
    runs["tpu_dist"]["mem"]["train_peak_bytes"] = torch.tpu.max_memory_allocated()
    # Compute alone: on 1 rank, the step at each smaller local batch that N
    # ranks would train on (GLOBAL_BATCH/N), with no collective to wait for.
    compute_only = {}
    if n == 1:
        for b in (GLOBAL_BATCH // 2, GLOBAL_BATCH // 4, GLOBAL_BATCH // 8):
            times = {t: [] for t in TRANSPORTS}
            for i in range(total):
                for t in (TRANSPORTS if i % 2 == 0 else TRANSPORTS[::-1]):
                    dt, _ = step(t, b)
                    if i >= args.warmup:
                        times[t].append(dt)
            compute_only[str(b)] = {t: statistics.median(times[t]) for t in TRANSPORTS}
    fallbacks = sorted(torch_tpu.fallback_ops())

    def timed_calls(calls, device, reps):
        out = []
        for _ in range(reps):
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            for c in calls:
                c()
            sync(device)
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    def collective(op, out_shape, in_shape, dtype, device, group):
        o = torch.zeros(out_shape, dtype=dtype, device=device)
        i = torch.ones(in_shape, dtype=dtype, device=device)
        if op == "all_gather":
            return lambda: real[op](o, i, group=group)
        return lambda: real[op](o, i, op=dist.ReduceOp.AVG, group=group)

    # Replay of the recorded step's collectives, alone, on each transport.
    groups = {"tpu_dist": dist.group.WORLD, "gloo": gloo}
    comm = {}
    for t in TRANSPORTS:
        calls = [collective(*rec, devices[t], groups[t]) for rec in recorded]
        timed_calls(calls, devices[t], 1)
        comm[t] = timed_calls(calls, devices[t], args.comm_reps)
    # alpha/beta probe: one all_gather of each PROBE_BYTES output size (float32).
    probe = {}
    for t in TRANSPORTS:
        for size in PROBE_BYTES:
            numel = size // 4
            c = collective("all_gather", (numel,), (numel // n,), torch.float32, devices[t], groups[t])
            timed_calls([c], devices[t], 1)
            probe[f"{t}:{size}"] = timed_calls([c], devices[t], max(5, args.comm_reps))

    mine = {"times": {t: runs[t]["times"] for t in TRANSPORTS}, "comm": comm, "probe": probe,
            "mem": runs["tpu_dist"]["mem"], "fallbacks": fallbacks,
            "compute_only": compute_only}
    every = [None] * n
    dist.all_gather_object(every, mine)
    if rank == 0:
        doc = {"ranks": n, "local_batch": local_batch, "n_params": runs["tpu_dist"]["n_params"],
               "collectives_per_step": [{"op": op, "out": list(o), "in": list(i), "dtype": str(d)}
                                        for op, o, i, d in recorded],
               "losses": {t: runs[t]["losses"] for t in TRANSPORTS}, "per_rank": every}
        print(RESULT_PREFIX + json.dumps(doc), flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


# ---------------------------------------------------------------- driver side

def run_ranks(n, args):
    """One torchrun of n workers -> (their document, wall seconds, "") or (None, the reason, the output's tail)."""
    worker_args = ["--warmup", str(args.warmup), "--steps", str(args.steps), "--comm-reps", str(args.comm_reps)]
    # Each rank sees LOCAL_WORLD_SIZE devices, not the count this process was given.
    return run_workers(__file__, n, worker_args, args.timeout, RESULT_PREFIX, unset_env=("TORCH_TPU_NUM_DEVICES",))


def summarize(doc):
    """Per transport: slowest rank's median step and replayed comm time,
    tokens/s, comm share, and the alpha/beta fit of the probe."""
    n, ranks = doc["ranks"], doc["per_rank"]
    out = {}
    for t in TRANSPORTS:
        step = max(statistics.median(r["times"][t]) for r in ranks)
        comm = max(r["comm"][t] for r in ranks)
        # alpha, beta: least-squares line time = alpha + received bytes / beta.
        xs = [size * (n - 1) / n for size in PROBE_BYTES]
        ys = [max(r["probe"][f"{t}:{size}"] for r in ranks) for size in PROBE_BYTES]
        alpha = beta = None
        if n > 1:
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            if slope > 0:
                beta, alpha = 1 / slope, max(0.0, my - slope * mx)
        out[t] = {"step_s": step, "comm_s": comm, "comm_share": comm / step,
                  "tokens_per_s": GLOBAL_BATCH * SEQ / step, "flops_per_s": step_flops() / step,
                  "alpha_s": alpha, "beta_Bps": beta}
    mems = [r["mem"] for r in ranks]
    out["tpu_dist"]["param_bytes_per_rank"] = max(m["param_bytes_max_allocated"] for m in mems)
    out["tpu_dist"]["param_bytes_held_per_rank"] = max(m["param_bytes_allocated"] for m in mems)
    out["tpu_dist"]["train_peak_bytes_per_rank"] = max(m["train_peak_bytes"] for m in mems)
    return out


def compute_fit(one):
    """Least-squares line t = t0 + c * batch through the 1-rank tpu_dist step
    times at batches GLOBAL_BATCH/{1,2,4,8}: t0 is the per-step cost that does
    not shrink with the batch (op dispatch, optimizer), c the time per sequence."""
    pts = {GLOBAL_BATCH: one["summary"]["tpu_dist"]["step_s"]}
    pts.update({int(b): v["tpu_dist"] for b, v in one["per_rank"][0]["compute_only"].items()})
    xs, ys = list(pts), [pts[b] for b in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    c = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"t0_s": my - c * mx, "s_per_sequence": c, "points_s": {str(b): pts[b] for b in pts},
            "marginal_flops_per_s": step_flops() / GLOBAL_BATCH / c if c > 0 else None}


def predict(doc, fit, cores):
    """Step time from the model: compute = t0 + c * local batch, slowed by
    N/cores where N ranks share fewer cores, plus every recorded collective
    as alpha + received bytes / beta, with no overlap."""
    n, s = doc["ranks"], doc["summary"]["tpu_dist"]
    compute = (fit["t0_s"] + fit["s_per_sequence"] * GLOBAL_BATCH / n) / min(1.0, cores / n)
    comm = 0.0 if n == 1 or s["beta_Bps"] else None  # None: probe too noisy for a fit
    if n > 1 and s["beta_Bps"]:
        for c in doc["collectives_per_step"]:
            elem = 2 if "16" in c["dtype"] else 4
            full = math.prod(c["out"] if c["op"] == "all_gather" else c["in"]) * elem
            comm += max(s["alpha_s"], 0.0) + full * (n - 1) / n / s["beta_Bps"]
    return {"compute_s": compute, "comm_s": comm, "step_s": None if comm is None else compute + comm,
            "step_with_replayed_comm_s": compute + s["comm_s"]}


def table(docs, cores):
    head = (f"{'ranks':>5s} {'transport':9s} {'step ms':>9s} {'comm ms':>9s} {'comm %':>7s} {'tok/s':>8s} "
            f"{'GFLOP/s':>8s} {'param KiB/rank max|held':>23s} {'peak KiB':>9s} {'model ms':>9s} {'c+replay':>9s} "
            f"{'tpu/gloo':>8s}")
    lines = [head, "-" * len(head)]
    for d in docs:
        s = d["summary"]
        for t in TRANSPORTS:
            r = s[t]
            mem = f"{r['param_bytes_per_rank'] / 1024:11.0f} | {r['param_bytes_held_per_rank'] / 1024:9.0f} " \
                  f"{r['train_peak_bytes_per_rank'] / 1024:9.0f}" if t == "tpu_dist" else f"{'-':>23s} {'-':>9s}"
            pr = d.get("prediction") if t == "tpu_dist" else None
            model = (f"{pr['step_s'] * 1e3:9.1f}" if pr["step_s"] is not None else f"{'no fit':>9s}") if pr \
                else f"{'-':>9s}"
            model += f" {pr['step_with_replayed_comm_s'] * 1e3:9.1f}" if pr else f" {'-':>9s}"
            ratio = f"{s['tpu_dist']['step_s'] / s['gloo']['step_s']:8.2f}" if t == "tpu_dist" else ""
            over = " (oversubscribed)" if d["ranks"] > cores and t == "tpu_dist" else ""
            lines.append(f"{d['ranks']:5d} {t:9s} {r['step_s'] * 1e3:9.1f} {r['comm_s'] * 1e3:9.1f} "
                         f"{100 * r['comm_share']:6.0f}% {r['tokens_per_s']:8.0f} {r['flops_per_s'] / 1e9:8.2f} "
                         f"{mem} {model} {ratio}{over}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="1,2,4", help="comma-separated process counts (1, 2, 4, 8)")
    p.add_argument("--quick", action="store_true", help="1 warm-up and 3 timed steps, 3 comm replays")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--comm-reps", type=int, default=5)
    add_arguments(p)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    ranks = parse_ranks(args.ranks, (1, 2, 4, 8))
    if args.quick:
        args.warmup, args.steps, args.comm_reps = 1, 3, 3

    cores = os.cpu_count()
    started = datetime.datetime.now(datetime.timezone.utc)
    doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
           "args": {"ranks": ranks, "quick": args.quick, "warmup": args.warmup, "steps": args.steps,
                    "comm_reps": args.comm_reps, "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "1")},
           "model": {"vocab": VOCAB, "dim": DIM, "heads": HEADS, "layers": LAYERS, "seq": SEQ,
                     "global_batch": GLOBAL_BATCH, "step_flops": step_flops()},
           "results": {}}
    print(f"load {os.getloadavg()[0]:.2f} on {cores} cores; FSDP2, {LAYERS}-layer d={DIM} transformer, "
          f"global batch {GLOBAL_BATCH}x{SEQ} tokens, fp32; step = slowest rank's median of {args.steps}",
          flush=True)
    if max(ranks) > cores:
        print(f"note: {max(ranks)} ranks on {cores} cores oversubscribe the CPU: ranks share cores, "
              f"so times past {cores} ranks measure contention, not scaling", flush=True)
    failed, docs = False, []
    for n in ranks:
        res, wall, tail = run_ranks(n, args)
        if res is None:
            failed = True
            doc["results"][str(n)] = {"status": "failed", "reason": wall, "output_tail": tail}
            print(f"\nranks {n}: FAILED: {wall}\n{tail}", flush=True)
            continue
        res["status"], res["process_s"] = "ok", wall
        res["summary"] = summarize(res)
        doc["results"][str(n)] = res
        docs.append(res)
    one = doc["results"].get("1", {})
    if one.get("status") == "ok":
        fit = doc["compute_fit"] = compute_fit(one)
        for d in docs:
            d["prediction"] = predict(d, fit, cores)
            same = fit["points_s"].get(str(GLOBAL_BATCH // d["ranks"]))
            if same is not None:
                # Communication share by subtraction: the N-rank step against
                # 1 rank's step on the same local batch (no collectives).
                d["summary"]["tpu_dist"]["compute_alone_s"] = same
                d["summary"]["tpu_dist"]["comm_share_by_subtraction"] = 1 - same / d["summary"]["tpu_dist"]["step_s"]
    print("\n" + table(docs, cores), flush=True)
    for d in docs:
        diff = max(abs(a - b) for a, b in zip(d["losses"]["tpu_dist"], d["losses"]["gloo"]))
        print(f"ranks {d['ranks']}: losses, tpu_dist against gloo: max |difference| {diff:.2g}")
    fb = sorted({f for d in docs for r in d["per_rank"] for f in r["fallbacks"]})
    if "compute_fit" in doc:
        f = doc["compute_fit"]
        print("1-rank tpu_dist step vs local batch: "
              + ", ".join(f"{b}: {v * 1e3:.1f} ms" for b, v in f["points_s"].items())
              + f"; fit t0 = {f['t0_s'] * 1e3:.1f} ms + {f['s_per_sequence'] * 1e3:.2f} ms/sequence"
              + (f" ({f['marginal_flops_per_s'] / 1e9:.1f} GFLOP/s marginal)" if f["marginal_flops_per_s"] else ""))
        for d in docs:
            s = d["summary"]["tpu_dist"]
            if "compute_alone_s" in s:
                print(f"ranks {d['ranks']}: 1 rank on the same local batch {s['compute_alone_s'] * 1e3:.1f} ms -> "
                      f"comm share by subtraction {100 * s['comm_share_by_subtraction']:.0f}%")
    print(f"CPU fallbacks: {fb or 'none'}; comm = the step's recorded collectives replayed alone "
          f"(no overlap);\n"
          f"model = 1-rank compute fit at the local batch / min(1, cores/N) + alpha + bytes/beta per collective "
          f"(fit over {len(PROBE_BYTES)} all_gather sizes); c+replay = the same compute + the replayed collectives")

    path = save_results(doc, args.out, "scaling", started)
    print(f"results: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
