"""Modelled parallel layouts for a world size: rows the tuner shows as
"modelled", never as measured, and never picks.

For a world size n and the pick's measured single-device step (time t at
batch B, parameter bytes P from the worker), at the same global token budget
per device (each device keeps batch B):
    DDP       t + 2 (n-1)/n P / bw     (all-reduce of the gradients)
    FSDP      t + 3 (n-1)/n P / bw     (all-gather forward and backward,
                                         reduce-scatter of the gradients)
with bw one chip's ICI ingress as benchmarks/scaling_model.py takes it
(docs/scaling.md: 1.2 TB/s both directions, 70% achieved, half of it in):
4.2e11 B/s. No overlap of communication with compute is assumed (an upper
bound of the step); FSDP's gain is memory: its state per device is 1/n.
Tensor and expert parallel degrees need the model's layer shapes, which the
tuner does not see; benchmarks/scaling_model.py models them for one model.
"""
from .result import Row

ICI_INGRESS = 1.2e12 / 2 * 0.7  # bytes/s into one chip (docs/scaling.md)


def rows(pick, world_size):
    if not pick.ok_runs or world_size < 2:
        return []
    run = pick.ok_runs[0]
    p = run.get("param_bytes")
    if not p:
        return []
    n, t, tokens = world_size, pick.step_s, pick.tokens
    out = []
    for name, factor in (("DDP", 2), ("FSDP", 3)):
        step = t + factor * (n - 1) / n * p / ICI_INGRESS
        row = Row({"layout": f"{name.lower()}{n}"}, kind="modelled", label=f"{name} x{n} ({pick.label})")
        row.modelled = {"step_s": step, "tokens_per_s": n * tokens / step,
                        "note": f"{factor} x (n-1)/n x {p / 2**20:.1f} MiB over {ICI_INGRESS / 1e9:.0f} GB/s"}
        row.status = "modelled"
        out.append(row)
    return out
