"""Shared by the torchrun worker scripts: inputs per dtype and the checks."""

import os

import torch

import torch_tpu  # noqa: F401  (registers tpu_dist)

DTYPES = [
    torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
]


class NormMLP(torch.nn.Module):
    """LayerNorm, then Linear-ReLU-Linear: the tensor-parallel workers' model
    (the two Linears are the Colwise/Rowwise pair)."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(torch.relu(self.up(self.norm(x))))


def rank_world():
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def sample(shape, dtype, seed):
    """A CPU tensor with small values (products over 4 ranks stay exact)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, shape, generator=g).to(dtype)


def assert_same(name, got, want):
    """tpu results must equal gloo's on the CPU exactly: the transport runs
    the same gloo arithmetic on the same host values."""
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{name}: tpu_dist gave {got.dtype}{list(got.shape)} {got}\n"
                             f"gloo on the CPU gave {want.dtype}{list(want.shape)} {want}")


def assert_reduced(name, got, want, world):
    """A reduction's result: over 2 ranks, or for integer and bool dtypes,
    exactly gloo's. Float sums and products over more ranks may differ in
    the last bits: tpu_dist combines small messages on each host in rank
    order (csrc/backend/distributed/inline_collectives.h), gloo in its ring's
    order."""
    if world <= 2 or not want.dtype.is_floating_point:
        return assert_same(name, got, want)
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, f"{name}: {got.dtype}{list(got.shape)}"
    tol = 4 * world * torch.finfo(want.dtype).eps * max(1.0, want.double().abs().max().item())
    err = (got.double() - want.double()).abs().max().item() if want.numel() else 0.0
    if not err <= tol:
        raise AssertionError(f"{name}: tpu_dist differs from gloo by {err} (> {tol})\n{got}\n{want}")


def report(rank, cases):
    """Prints the line dist_launch.run_ok looks for, once nothing this rank
    ran on tpu fell back to the CPU."""
    assert not torch_tpu.fallback_ops(), f"rank {rank}: CPU fallbacks {torch_tpu.fallback_ops()}"
    print(f"rank {rank}: {cases} cases passed", flush=True)
