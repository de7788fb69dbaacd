"""init_process_group() with no backend picks tpu_dist for tpu; new_group,
subgroups and DeviceMesh dimensions run tpu_dist collectives on the right
ranks."""

from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from _common import rank_world, report

rank, world = rank_world()
dist.init_process_group()
assert dist.get_backend_config() == "tpu:tpu_dist", dist.get_backend_config()
cases = 0

t = torch.full((3,), float(rank), device="tpu")
dist.all_reduce(t)
assert t.cpu().tolist() == [float(sum(range(world)))] * 3, t
cases += 1

# new_group of the even ranks: only they take part.
evens = list(range(0, world, 2))
g = dist.new_group(evens)
if rank in evens:
    t = torch.full((2,), float(rank + 1), device="tpu")
    dist.all_reduce(t, group=g)
    assert t.cpu().tolist() == [float(sum(r + 1 for r in evens))] * 2, t
    out = [torch.empty(1, device="tpu") for _ in evens]
    dist.all_gather(out, torch.full((1,), float(rank), device="tpu"), group=g)
    assert [o.item() for o in out] == [float(r) for r in evens], out
    dist.broadcast(t, group_src=len(evens) - 1, group=g)
dist.barrier()
cases += 1

# DeviceMesh: every dimension is a group of its own.
shape = (2, world // 2) if world >= 4 else (world,)
names = ("dp", "tp")[: len(shape)]
mesh = init_device_mesh("tpu", shape, mesh_dim_names=names)
for name in names:
    grp = mesh.get_group(name)
    members = dist.get_process_group_ranks(grp)
    t = torch.full((4,), float(rank), device="tpu")
    dist.all_reduce(t, group=grp)
    assert t.cpu().tolist() == [float(sum(members))] * 4, (name, members, t)
    cases += 1

# torch.distributed.set_timeout (torch 2.14; _set_pg_timeout before it)
# reaches tpu_dist and its gloo transport; collectives go on working.
set_timeout = getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout
set_timeout(timedelta(seconds=600))
t = torch.full((2,), 1.0, device="tpu")
dist.all_reduce(t)
assert t.cpu().tolist() == [float(world)] * 2, t
cases += 1

report(rank, cases)
dist.destroy_process_group()
