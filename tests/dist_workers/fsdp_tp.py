"""2-D parallelism on 4 ranks: FSDP2 over the "dp" dimension and tensor
parallel over "tp" of a (2, 2) mesh. The tpu run (tpu tensors, tpu_dist)
equals the same run on CPU tensors (gloo, the other backend of the same
groups) and one CPU process training on the full batch."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import torch_tpu
from _common import rank_world, report

rank, world = rank_world()
assert world == 4, world
dist.init_process_group("cpu:gloo,tpu:tpu_dist")
DIM, HID, BATCH, STEPS = 8, 16, 2, 3


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(DIM, HID), torch.nn.ReLU(), torch.nn.Linear(HID, DIM),
                               torch.nn.Linear(DIM, HID), torch.nn.ReLU(), torch.nn.Linear(HID, DIM))


def batches():
    """STEPS batches of the whole dp world: 2 * BATCH rows."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(2 * BATCH, DIM, generator=g), torch.randn(2 * BATCH, DIM, generator=g))
            for _ in range(STEPS)]


def run_2d(device_type):
    mesh = init_device_mesh(device_type, (2, 2), mesh_dim_names=("dp", "tp"))
    dp = mesh["dp"].get_local_rank()
    model = make_model().to(device_type)
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel(),
                                           "3": ColwiseParallel(), "5": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in batches():
        rows = slice(dp * BATCH, (dp + 1) * BATCH)
        loss = torch.nn.functional.mse_loss(model(x[rows].to(device_type)), y[rows].to(device_type))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().cpu())
    params = [(p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu() for p in model.parameters()]
    return losses, params


def run_single():
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for x, y in batches():
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return [p.detach() for p in model.parameters()]


got_losses, got_params = run_2d("tpu")
want_losses, want_params = run_2d("cpu")
ref_params = run_single()
for got, want in zip(got_losses, want_losses):
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
for i, (got, want, ref) in enumerate(zip(got_params, want_params, ref_params)):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=lambda m: f"param {i} vs gloo: {m}")
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5, msg=lambda m: f"param {i} vs one process: {m}")
assert not torch_tpu.fallback_ops(), torch_tpu.fallback_ops()
report(rank, STEPS + len(ref_params))
dist.destroy_process_group()
