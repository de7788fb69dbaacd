"""DistributedDataParallel on tpu against one CPU process on the full batch.

Each rank trains DDP(model.to("tpu")) on its shard of every batch, with
small buckets (several all_reduces per step) and a no_sync micro-batch
(gradient accumulation); the reference trains the same model on the CPU on
the whole batch in this process. Losses (averaged over ranks) and parameters
must match. argv[1]: the init_process_group backend ("" for the default)."""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _common import rank_world, report

rank, world = rank_world()
backend = sys.argv[1] if len(sys.argv) > 1 else ""
if backend == "device_id":
    # No backend, a device: c10d picks the device's default backend.
    # As with CUDA, each rank then works on its own device (tpu:LOCAL_RANK).
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.tpu.set_device(local_rank)
    dist.init_process_group(device_id=torch.device("tpu", local_rank))
    assert dist.get_backend() == "tpu_dist", dist.get_backend()
else:
    dist.init_process_group(backend or None)
if not backend:
    assert dist.get_backend_config().endswith("tpu:tpu_dist") or "tpu:tpu_dist" in dist.get_backend_config(), \
        dist.get_backend_config()


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


ref = make_model()
ddp = DDP(make_model().to("tpu"), bucket_cap_mb=0.002)  # ~500 floats: several buckets
if backend == "device_id":
    assert next(ddp.parameters()).device == torch.device("tpu", int(os.environ["LOCAL_RANK"]))
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
g = torch.Generator().manual_seed(1)
batch = 4 * world
shard = slice(rank * 4, (rank + 1) * 4)
for step in range(4):
    micro = [(torch.randn(batch, 8, generator=g), torch.randn(batch, 4, generator=g)) for _ in range(2)]
    # reference: full batch, two accumulated micro-batches
    ref_opt.zero_grad()
    ref_losses = []
    for x, y in micro:
        loss = torch.nn.functional.mse_loss(ref(x), y) / 2
        loss.backward()
        ref_losses.append(loss.detach())
    ref_opt.step()
    # DDP: the first micro-batch under no_sync, the second syncs
    opt.zero_grad()
    losses = []
    for i, (x, y) in enumerate(micro):
        x, y = x[shard].to("tpu"), y[shard].to("tpu")
        if i == 0:
            with ddp.no_sync():
                loss = torch.nn.functional.mse_loss(ddp(x), y) / 2
                loss.backward()
        else:
            loss = torch.nn.functional.mse_loss(ddp(x), y) / 2
            loss.backward()
        losses.append(loss.detach())
    opt.step()
    for got, want in zip(losses, ref_losses):
        mean = got.clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        torch.testing.assert_close(mean.cpu(), want, rtol=1e-5, atol=1e-6)
for p_dev, p_ref in zip(ddp.module.parameters(), ref.parameters()):
    torch.testing.assert_close(p_dev.detach().cpu(), p_ref.detach(), rtol=1e-5, atol=1e-6)
report(rank, 4)
dist.destroy_process_group()
