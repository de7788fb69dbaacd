"""Step-time and MFU model for FSDP2 + expert parallelism of Qwen3-235B-A22B
on a TPU v7x (Ironwood) pod; docs/scaling.md states and sources every figure.

    python benchmarks/scaling_model.py            # 256 to 8,192 chips, rho 1 and 0.3
    python benchmarks/scaling_model.py --json     # the same rows as JSON

Per chip and per training step (forward + backward):
    t_compute = model FLOPs / (peak * eta) + weight reads / HBM bandwidth
    t_fsdp    = FSDP bytes received / B_ici + collectives * alpha(N)
    t_a2a     = all-to-all bytes sent / B_a2a + all-to-alls * alpha_a2a
    t_step    = t_compute + max(0, t_fsdp - t_compute) + one layer's FSDP traffic
                + rho * t_a2a
    MFU       = model FLOPs / (t_step * peak)
rho is the exposed share of the all-to-all (1: none hidden, as eager
FSDP2 + a plain all_to_all_single EP layer runs; 0.3: micro-batches overlap it).
"""
import argparse
import json
import math

# ---- chip (docs/scaling.md, "Chip figures")
PEAK_BF16 = 2307e12          # FLOP/s per chip, dense bf16
HBM_BW = 7.3e12              # bytes/s per chip
HBM_BYTES = 192 * 2**30
ICI_BIDIR = 1.2e12           # bytes/s per chip, all links, both directions
LINKS = 6                    # assumption: 3D torus, one link per neighbour
CUBE = 64                    # chips per 4x4x4 cube
# ---- assumptions (docs/scaling.md, "Assumptions")
ETA = 0.55                   # achieved share of peak in matmuls (kernels, not comm)
ICI_EFF = 0.7                # achieved share of link bandwidth in collectives
ALPHA_HOP = 2e-6             # seconds per torus hop of a collective's latency
SEQ = 4096
GLOBAL_TOKENS = 4096 * SEQ    # 4,096 sequences of 4,096 tokens per step
# ---- model (Qwen3-235B-A22B config)
L, D, HQ, HKV, HD, E, TOPK, DFF, VOCAB = 94, 4096, 64, 4, 128, 128, 8, 1536, 151936


def params():
    attn = D * HQ * HD * 2 + D * HKV * HD * 2          # q, o; k, v
    expert = 3 * D * DFF                               # gate, up, down
    dense = L * (attn + D * E + 4 * D) + 2 * VOCAB * D  # + router, norms; embed, head
    return {"attn_layer": attn, "expert": expert, "dense": dense,
            "experts_total": L * E * expert, "total": dense + L * E * expert,
            "active": dense + L * TOPK * expert}


def model_flops_per_token():
    """6 x active matmul parameters (embedding lookup excluded) + causal
    attention scores and values (fwd 2 x 2 x SEQ/2 x HQ*HD per layer, x3)."""
    p = params()
    matmul = L * (p["attn_layer"] + D * E + TOPK * p["expert"]) + VOCAB * D
    return 6 * matmul + 3 * L * 2 * 2 * (SEQ / 2) * HQ * HD


def torus(n):
    """A near-cubic 3D torus of n chips (powers of two): its sides."""
    k = round(math.log2(n))
    a = [2 ** (k // 3 + (1 if i < k % 3 else 0)) for i in range(3)]
    return sorted(a)


def step(n, tokens_per_chip, rho, ep=CUBE):
    p = params()
    ingress = ICI_BIDIR / 2 * ICI_EFF                  # bytes/s into one chip, all links
    # compute: model FLOPs at eta of peak, plus reading this chip's gathered
    # weights three times (forward, backward data, backward weights).
    f = model_flops_per_token() * tokens_per_chip
    experts_here = E // ep                              # experts per chip per layer
    weights_read = 3 * 2 * (p["dense"] + L * experts_here * p["expert"])
    t_compute = f / (PEAK_BF16 * ETA) + weights_read / HBM_BW
    # FSDP: dense weights over all n chips, each chip's experts over the n/ep
    # chips that host the same experts; bf16 all-gather twice (forward and
    # re-gather in backward), fp32 reduce-scatter once.
    fsdp_dense = (2 * 2 + 4) * p["dense"] * (n - 1) / n
    rep = n // ep
    fsdp_exp = (2 * 2 + 4) * L * experts_here * p["expert"] * (rep - 1) / rep
    hops = sum(s // 2 for s in torus(n))               # torus diameter
    n_coll = 3 * L + 3                                  # per layer: AG, AG, RS; + root
    t_fsdp = (fsdp_dense + fsdp_exp) / ingress + 2 * n_coll * hops * ALPHA_HOP
    t_fsdp_layer = (fsdp_dense + fsdp_exp) / (L + 1) / ingress
    # EP all-to-all in a 4x4x4 cube: dispatch + combine, forward and
    # backward, bf16; bisection-bound: 2*16 links per direction cut.
    sent = 4 * L * tokens_per_chip * TOPK * D * 2 * (ep - 1) / ep
    link = ICI_BIDIR / LINKS / 2 * ICI_EFF              # one direction of one link
    bisection = 2 * 16 * link                           # bytes/s across the cube's half
    b_a2a = bisection / (ep / 2) * 2                    # per chip: half its data crosses
    t_a2a = sent / b_a2a + 4 * L * 6 * ALPHA_HOP
    exposed_fsdp = max(0.0, t_fsdp - t_compute) + t_fsdp_layer
    t = t_compute + exposed_fsdp + rho * t_a2a
    mem = 16 * (p["dense"] / n + L * experts_here * p["expert"] / rep)  # bf16 param+grad, fp32 master+2 Adam
    return {"chips": n, "torus": "x".join(map(str, torus(n))), "tokens_per_chip": tokens_per_chip,
            "rho": rho, "t_compute_ms": 1e3 * t_compute, "t_fsdp_ms": 1e3 * t_fsdp,
            "t_fsdp_exposed_ms": 1e3 * exposed_fsdp, "t_a2a_ms": 1e3 * t_a2a, "t_step_ms": 1e3 * t,
            "mfu": f / (t * PEAK_BF16), "state_GiB_per_chip": mem / 2**30,
            "tokens_per_s": tokens_per_chip * n / t}


SCALES = (256, 512, 1024, 2048, 4096, 8192)


def scenarios():
    rows = []
    for rho in (1.0, 0.3):
        for n in SCALES:
            rows.append(dict(step(n, GLOBAL_TOKENS // n, rho), scenario="global batch 16M tokens"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    p, rows = params(), scenarios()
    if args.json:
        print(json.dumps({"params": p, "flops_per_token": model_flops_per_token(), "rows": rows}, indent=1))
        return
    print(f"params: total {p['total'] / 1e9:.1f}B, active {p['active'] / 1e9:.1f}B, dense {p['dense'] / 1e9:.2f}B; "
          f"model FLOPs/token {model_flops_per_token() / 1e9:.0f} G")
    head = f"{'scenario':24s} {'rho':>4s} {'chips':>6s} {'torus':>9s} {'tok/chip':>8s} {'compute':>8s} " \
           f"{'fsdp':>7s} {'exposed':>7s} {'a2a':>7s} {'step ms':>8s} {'MFU':>6s} {'state GiB':>9s}"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r['scenario']:24s} {r['rho']:4.1f} {r['chips']:6d} {r['torus']:>9s} {r['tokens_per_chip']:8d} "
              f"{r['t_compute_ms']:8.1f} {r['t_fsdp_ms']:7.1f} {r['t_fsdp_exposed_ms']:7.1f} {r['t_a2a_ms']:7.1f} "
              f"{r['t_step_ms']:8.1f} {100 * r['mfu']:5.1f}% {r['state_GiB_per_chip']:9.1f}")


if __name__ == "__main__":
    main()
