"""The pod model's step formula (benchmarks/scaling_model.py) evaluated for
TorchTitan's Qwen3 MoE debug model on this machine, against the step times
benchmarks/moe.py measured at 1, 2 and 4 ranks (docs/scaling.md, "Check
against the MoE debug model").

    python benchmarks/scaling_moe_check.py            # the table
    python benchmarks/scaling_moe_check.py --json

Same terms as the pod model, with rho = 1 (nothing overlaps here: every
collective is a host round trip on the host transport):
    t_step = t_compute + t_fsdp + t_a2a
    t_compute = the 1-rank step (all experts local), slowed by the ranks
                sharing the cores: x max(1, N * u / cores), u fitted to
                the 2-rank step (4 ranks check it, 8 are predicted)
    t_fsdp    = FSDP2 bytes received / beta + collectives * alpha
    t_a2a     = 4 all_to_alls per MoE layer (dispatch and combine, forward
                and backward) * (alpha + bytes sent / beta)
The pod model sends T*K rows per chip per all_to_all, (ep-1)/ep of them
away; the capacity dispatcher here (docs/moe.md) sends a C = T*K row block
to every EP rank, EP times that volume: both are printed.
Every input below is labelled measured (with its source) or assumed.
"""
import argparse
import json

# ---- model: qwen3_moe_debug_sdpa_2_layers (TorchTitan 0.3.0 config), float32
LAYERS, DIM, EXPERTS, TOPK, HIDDEN, VOCAB = 2, 256, 64, 8, 768, 2048
QKV_OUT, WO_IN = 4096, 2048          # fused q (16 x 128) + k, v (8 x 128 each); o projection
BYTES = 4
TOKENS = 32 * 2                      # seq 32 x local batch 2 per rank (benchmarks/moe.py's runs)
CORES = 2

# ---- measured: benchmarks/README.md "MoE" (2026-12-06, benchmarks/moe.py, steps/s of tpu FSDP x EP N)
MEASURED_STEPS_PER_S = {1: 0.932, 2: 0.761, 4: 0.438}
# ---- measured: docs/scaling.md "Check against this machine" (2026-12-05, all_gather fits of the host
# transport, benchmarks/scaling.py): alpha seconds, beta bytes/s, per rank count
HOST_TRANSPORT = {2: (0.29e-3, 2.7e9), 4: (1.5e-3, 0.75e9), 8: (5.9e-3, 2.2e9)}
SEQ = 32
# ---- fitted: u, the cores one tpu rank keeps busy (eager dispatch beside the plugin's compute; 1.6 for
# the dense FSDP2 model alone, docs/scaling.md), is fitted to the 2-rank step (fit_u); 4 ranks check it.


def params():
    attn = DIM * QKV_OUT + WO_IN * DIM
    router = DIM * EXPERTS
    expert = 3 * DIM * HIDDEN
    dense = LAYERS * (attn + router + 4 * DIM) + 2 * VOCAB * DIM
    return {"dense": dense, "expert": expert, "experts_total": LAYERS * EXPERTS * expert}


def model_flops_per_token():
    """Training FLOPs per token: 6 x the matmul parameters a token passes
    through (top-k experts) + causal attention scores and values."""
    p = params()
    matmul = LAYERS * (DIM * QKV_OUT + WO_IN * DIM + DIM * EXPERTS + TOPK * p["expert"]) + VOCAB * DIM
    return 6 * matmul + 3 * LAYERS * 2 * 2 * (SEQ / 2) * WO_IN


def step(n, u=None):
    u = fit_u() if u is None else u
    p = params()
    t1 = 1 / MEASURED_STEPS_PER_S[1]
    t_compute = t1 * max(1.0, n * u / CORES)
    if n == 1:
        return {"ranks": n, "t_compute_s": t_compute, "t_fsdp_s": 0.0, "t_a2a_s": 0.0,
                "a2a_bytes_pod": 0, "a2a_bytes_capacity": 0, "t_step_s": t_compute}
    alpha, beta = HOST_TRANSPORT[n]
    # FSDP2 over n ranks shards the dense weights (experts are split by EP = n, not FSDP-sharded):
    # all_gather forward and again in backward, reduce_scatter of the gradients; 3 per block + the root.
    fsdp_bytes = 3 * BYTES * p["dense"] * (n - 1) / n
    t_fsdp = fsdp_bytes / beta + (3 * LAYERS + 3) * alpha
    rows_pod = TOKENS * TOPK * (n - 1) / n
    rows_capacity = n * TOKENS * TOPK * (n - 1) / n   # a C = T*K block to each of the n ranks
    a2a_pod = rows_pod * DIM * BYTES
    a2a_capacity = rows_capacity * DIM * BYTES
    t_a2a = 4 * LAYERS * (alpha + a2a_capacity / beta)
    return {"ranks": n, "t_compute_s": t_compute, "t_fsdp_s": t_fsdp, "t_a2a_s": t_a2a,
            "a2a_bytes_pod": a2a_pod, "a2a_bytes_capacity": a2a_capacity,
            "t_step_s": t_compute + t_fsdp + t_a2a}


def fit_u():
    """u that makes the 2-rank prediction equal the measured 2-rank step."""
    t1 = 1 / MEASURED_STEPS_PER_S[1]
    comm = step(2, u=1.0)
    rest = comm["t_fsdp_s"] + comm["t_a2a_s"]
    return (1 / MEASURED_STEPS_PER_S[2] - rest) / t1 * CORES / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="print u fitted to the 2-rank step")
    args = ap.parse_args()
    if args.fit:
        print(f"u fitted to the 2-rank step: {fit_u():.2f}")
        return
    rows = []
    for n in (1, 2, 4, 8):
        r = step(n)
        measured = 1 / MEASURED_STEPS_PER_S[n] if n in MEASURED_STEPS_PER_S else None
        r["measured_s"] = measured
        r["predicted_over_measured"] = r["t_step_s"] / measured if measured else None
        rows.append(r)
    if args.json:
        print(json.dumps({"params": params(), "flops_per_token": model_flops_per_token(), "u": fit_u(),
                          "rows": rows}, indent=1))
        return
    p = params()
    t1 = 1 / MEASURED_STEPS_PER_S[1]
    flops = model_flops_per_token() * TOKENS
    print(f"qwen3_moe_debug, 2 layers: dense {p['dense'] / 1e6:.2f} M, experts {p['experts_total'] / 1e6:.1f} M "
          f"parameters; {TOKENS} tokens per rank; {flops / 1e9:.2f} GFLOP per 1-rank step "
          f"({flops / t1 / 1e9:.1f} GFLOP/s achieved); u fitted to 2 ranks = {fit_u():.2f}")
    head = (f"{'ranks':>5s} {'compute s':>9s} {'fsdp ms':>8s} {'a2a ms':>7s} {'a2a KiB pod':>11s} "
            f"{'a2a KiB here':>12s} {'predicted s':>11s} {'measured s':>10s} {'pred/meas':>9s}")
    print(head + "\n" + "-" * len(head))
    for r in rows:
        meas = f"{r['measured_s']:10.3f}" if r["measured_s"] else f"{'-':>10s}"
        ratio = f"{r['predicted_over_measured']:9.2f}" if r["predicted_over_measured"] else f"{'-':>9s}"
        print(f"{r['ranks']:5d} {r['t_compute_s']:9.3f} {1e3 * r['t_fsdp_s']:8.1f} {1e3 * r['t_a2a_s']:7.1f} "
              f"{r['a2a_bytes_pod'] / 1024:11.0f} {r['a2a_bytes_capacity'] / 1024:12.0f} {r['t_step_s']:11.3f} "
              f"{meas} {ratio}")


if __name__ == "__main__":
    main()
