"""DTensor and tensor parallel on tpu against the same program on CPU
tensors over gloo, on a 1-D mesh of every rank.

- distribute_tensor with Shard/Replicate, redistribute between placements
  (including Partial -> Replicate/Shard), from_local / full_tensor;
- parallelize_module on an MLP (ColwiseParallel, RowwiseParallel, and a
  SequenceParallel LayerNorm before them): forward, backward and SGD steps;
  the tpu run equals the gloo run and one CPU process on the full model;
- a mesh larger than the world raises, without a hang."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module)

import torch_tpu
from _common import NormMLP, rank_world, report

rank, world = rank_world()
dist.init_process_group("tpu_dist")
gloo = dist.new_group(backend="gloo")
tpu_mesh = init_device_mesh("tpu", (world,))
cpu_mesh = DeviceMesh.from_group(gloo, "cpu")
cases = 0


def placements_run(mesh):
    """Each DTensor operation's local results and full tensors, on the CPU."""
    g = torch.Generator().manual_seed(0)
    full = torch.randn(4 * world, 6, generator=g)
    dev = mesh.device_type
    out = []
    for placement in (Shard(0), Shard(1), Replicate()):
        d = distribute_tensor(full.to(dev), mesh, [placement])
        out += [d.to_local(), d.full_tensor()]
    d = distribute_tensor(full.to(dev), mesh, [Shard(0)])
    for target in ([Replicate()], [Shard(1)], [Shard(0)]):
        r = d.redistribute(mesh, target)
        out += [r.to_local(), r.full_tensor()]
        d = r
    # Partial: each rank holds a different addend.
    local = full[:, :3] * (rank + 1)
    p = DTensor.from_local(local.to(dev), mesh, [Partial()])
    out += [p.redistribute(mesh, [Replicate()]).to_local(), p.redistribute(mesh, [Shard(0)]).to_local(),
            p.full_tensor()]
    # Ops on DTensors: a sharded matmul and an elementwise op.
    a = distribute_tensor(full.to(dev), mesh, [Shard(0)])
    b = distribute_tensor(full.t().contiguous().to(dev), mesh, [Replicate()])
    out += [(a @ b).full_tensor(), (a.relu() + 1).sum().full_tensor()]
    return [t.cpu() for t in out]


for i, (got, want) in enumerate(zip(placements_run(tpu_mesh), placements_run(cpu_mesh))):
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"DTensor result {i}: {m}")
    cases += 1

DIM, HID, SEQ, BATCH = 8, 16, 2 * world, 2


def MLP():
    return NormMLP(DIM, HID)


def make_mlp():
    torch.manual_seed(0)
    return MLP()


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, SEQ, DIM, generator=g), torch.randn(BATCH, SEQ, DIM, generator=g)) for _ in range(3)]


def tp_run(mesh, sequence_parallel):
    """Tensor-parallel SGD steps; returns losses and full parameters."""
    dev = mesh.device_type
    model = make_mlp().to(dev)
    if sequence_parallel:
        plan = {"norm": SequenceParallel(), "up": ColwiseParallel(input_layouts=Shard(1)),
                "down": RowwiseParallel(output_layouts=Shard(1))}
    else:
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    parallelize_module(model, mesh, plan)
    # Without SequenceParallel the LayerNorm's parameters stay plain tensors
    # next to DTensors, which the foreach kernels refuse (on CUDA as well).
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=sequence_parallel)
    losses = []
    for x, y in batches():
        x, y = x.to(dev), y.to(dev)
        if sequence_parallel:  # each rank holds its slice of the sequence
            x = x.chunk(world, dim=1)[rank]
            y = y.chunk(world, dim=1)[rank]
        out = model(x)
        if isinstance(out, DTensor):
            out = out.to_local()
        loss = torch.nn.functional.mse_loss(out, y)
        if sequence_parallel:  # the full loss: the mean over the ranks' slices
            loss = DTensor.from_local(loss / world, mesh, [Partial()]).full_tensor()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().cpu())
    params = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu() for n, p in model.named_parameters()}
    return losses, params


def single_process_run():
    model = make_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in batches():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses, dict(model.named_parameters())


ref_losses, ref_params = single_process_run()
for sp in (False, True):
    got_losses, got_params = tp_run(tpu_mesh, sp)
    want_losses, want_params = tp_run(cpu_mesh, sp)
    for got, want, ref in zip(got_losses, want_losses, ref_losses):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for name, ref in ref_params.items():
        torch.testing.assert_close(got_params[name], want_params[name], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"sp={sp} {name} vs gloo: {m}")
        torch.testing.assert_close(got_params[name], ref.detach(), rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"sp={sp} {name} vs one process: {m}")
    cases += 1

# Bad input: a mesh larger than the world raises on every rank.
try:
    init_device_mesh("tpu", (2 * world,))
except (RuntimeError, ValueError) as e:
    assert str(world) in str(e) or "world" in str(e).lower(), e
    cases += 1
else:
    raise AssertionError("a mesh of twice the world size did not raise")

assert not torch_tpu.fallback_ops(), torch_tpu.fallback_ops()
report(rank, cases)
dist.destroy_process_group()
