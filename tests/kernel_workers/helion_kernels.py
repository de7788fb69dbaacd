"""Helion 1.5.1 kernels (Pallas backend) on tpu tensors, run through the
kernel bridge; run by tests/test_kernels_helion.py in a fresh process, since
Helion configures Dynamo and inductor as it imports.

Prints one JSON line per case: its name, the largest difference from torch
on the CPU and from the same torch op on tpu (the XLA path), relative where
values are large, and seconds.
argv[1:] picks cases (all when empty)."""
import json
import sys
import time

import torch
import helion
import helion.language as hl


@helion.kernel(backend="pallas", config=helion.Config(block_sizes=[8, 128]))
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(backend="pallas", config=helion.Config(block_sizes=[8]))
def row_sum(x: torch.Tensor) -> torch.Tensor:
    n, _ = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile_n in hl.tile(n):
        out[tile_n] = torch.sum(x[tile_n, :].to(torch.float32), dim=-1).to(x.dtype)
    return out


@helion.kernel(backend="pallas", config=helion.Config(block_sizes=[8]))
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _ = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        row = x[tile_n, :].to(torch.float32)
        e = torch.exp(row - torch.amax(row, dim=1, keepdim=True))
        out[tile_n, :] = (e / torch.sum(e, dim=1, keepdim=True)).to(x.dtype)
    return out


@helion.kernel(backend="pallas", config=helion.Config(block_sizes=[64, 128, 64]))
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(x.dtype)
    return out


@helion.kernel(backend="pallas", config=helion.Config(block_sizes=[8]))
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        centered = row - torch.mean(row, dim=-1, keepdim=True)
        var = torch.mean(centered * centered, dim=-1, keepdim=True)
        normed = centered * torch.rsqrt(var + 1e-5)
        out[tile_m, :] = (normed * weight[None, :].to(torch.float32) + bias[None, :].to(torch.float32)).to(x.dtype)
    return out


# A bounded autotune: Helion benchmarks each listed configuration on tpu
# tensors and keeps the fastest.
@helion.kernel(backend="pallas", configs=[helion.Config(block_sizes=[b]) for b in (8, 16, 32)])
def softmax_tuned(x: torch.Tensor) -> torch.Tensor:
    n, _ = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        row = x[tile_n, :]
        e = torch.exp(row - torch.amax(row, dim=1, keepdim=True))
        out[tile_n, :] = e / torch.sum(e, dim=1, keepdim=True)
    return out


# Helion's own search (effort "quick"), cut off by its time budget.
@helion.kernel(backend="pallas", autotune_effort="quick", autotune_budget_seconds=10)
def add_searched(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=GEN).to(dtype)


GEN = torch.Generator().manual_seed(0)
LN = torch.nn.functional.layer_norm
CASES = {
    "add_f32": (add, lambda: (randn(16, 256), randn(16, 256)), torch.add),
    "add_bf16": (add, lambda: (randn(16, 256, dtype=torch.bfloat16), randn(16, 256, dtype=torch.bfloat16)),
                 torch.add),
    "add_ragged": (add, lambda: (randn(50, 200), randn(50, 200)), torch.add),  # blocks overhang the edges
    "row_sum_f32": (row_sum, lambda: (randn(32, 128),), lambda x: x.sum(-1)),
    "softmax_f32": (softmax, lambda: (randn(32, 256),), lambda x: torch.softmax(x, -1)),
    "softmax_bf16": (softmax, lambda: (randn(32, 256, dtype=torch.bfloat16),),
                     lambda x: torch.softmax(x.float(), -1).to(x.dtype)),
    "matmul_f32": (matmul, lambda: (randn(128, 256), randn(256, 128)), torch.mm),
    "matmul_bf16": (matmul, lambda: (randn(128, 256, dtype=torch.bfloat16), randn(256, 128, dtype=torch.bfloat16)),
                    lambda x, y: (x.float() @ y.float()).to(x.dtype)),
    "layer_norm_f32": (layer_norm, lambda: (randn(32, 256), randn(256), randn(256)),
                       lambda x, w, b: LN(x, (x.shape[-1],), w, b)),
    "autotune_configs": (softmax_tuned, lambda: (randn(64, 256),), lambda x: torch.softmax(x, -1)),
    "autotune_quick": (add_searched, lambda: (randn(64, 256), randn(64, 256)), torch.add),
}


def run(name):
    kernel, make, reference = CASES[name]
    args = make()
    start = time.time()
    out = kernel(*[a.to("tpu") for a in args])
    seconds = time.time() - start
    cpu = reference(*args)
    xla = reference(*[a.to("tpu") for a in args]).cpu()
    got = out.cpu()
    return {"case": name, "device": str(out.device), "dtype": str(got.dtype), "shape": list(got.shape),
            "err_cpu": difference(got, cpu), "err_xla": difference(got, xla), "seconds": round(seconds, 2)}


def difference(got, ref):
    """The largest |got - ref| / (1 + |ref|): absolute near zero, relative on large values."""
    got, ref = got.double(), ref.double()
    return ((got - ref).abs() / (1 + ref.abs())).max().item()


for name in sys.argv[1:] or list(CASES):
    try:
        line = run(name)
    except Exception as e:  # noqa: BLE001 - the test reads the failure from the line
        line = {"case": name, "error": f"{type(e).__name__}: {e}"[:2000]}
    print(json.dumps(line), flush=True)
