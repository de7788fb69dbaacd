"""Collectives under torch.compile(backend="tpu") on tpu_dist, against gloo
on CPU tensors and against one CPU process on the full batch.

- a compiled function of `_c10d_functional` collectives (all_reduce,
  all_reduce_coalesced, all_gather_into_tensor, reduce_scatter_tensor,
  all_to_all_single, broadcast) between tpu ops equals the same function
  run eagerly on CPU tensors over gloo;
- a compiled tensor-parallel MLP (ColwiseParallel / RowwiseParallel after a
  replicated LayerNorm: all_reduce in the forward and in the backward
  graph) trains 3 SGD steps equal to one CPU process on the full batch;
- DDP: torch.compile of the DDP module (Dynamo's DDPOptimizer cuts the
  graph at the gradient buckets; the reducer's all-reduces stay eager hooks)
  trains 3 SGD steps equal to one CPU process on the full batch;
- FSDP2: torch 2.13 never traces FSDP2's hooks (`_dynamo_disable` on every
  one of them), so its all-gathers and reduce-scatters stay eager; each
  block's forward is compiled (its backward graph too) and 3 AdamW steps
  equal one CPU process on the full batch;
- fused eager: a collective runs the pending cluster first, so ops recorded
  before it read the values from before the collective.
No graph runs op by op (compile_stats()["eager_graphs"] is empty), graphs
with collectives are cut into program segments, and nothing falls back to
the CPU (the launcher sets TORCH_TPU_FALLBACK=error)."""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import torch_tpu
from _common import NormMLP, rank_world, report

rank, world = rank_world()
dist.init_process_group("tpu_dist")
gloo = dist.new_group(backend="gloo")
tpu_group = dist.group.WORLD
torch_tpu.compiler.register()
cases = 0


def check_no_eager_graphs():
    s = torch_tpu.compile_stats()
    assert not s["eager_graphs"], s["eager_graphs"]
    return s


# ---- funcol collectives in one compiled function -----------------------------

def collectives(x, group):
    y = funcol.all_reduce(x * 2, "sum", group) + 1
    a, b = funcol.all_reduce_coalesced([y, x - 1], "max", group)
    g = funcol.all_gather_tensor(a.sin(), 0, group)
    r = funcol.reduce_scatter_tensor(g * 3, "sum", 0, group)
    t = funcol.all_to_all_single(r + b, None, None, group)
    c = funcol.broadcast(t * 0.5, 1, group)
    return y, g, r.relu(), c - 1


# Quarters: every sum is exact, so the ranks' summation order (gloo's ring,
# tpu_dist's rank order) cannot change the result.
x = (torch.arange(4 * world * 3, dtype=torch.float32).view(4 * world, 3) + 7 * rank) / 4
want = collectives(x, gloo)
compiled = torch.compile(collectives, backend="tpu", fullgraph=True)
for _ in range(2):  # the second call runs the cached segments
    got = compiled(x.to("tpu"), tpu_group)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5, msg=lambda m: f"funcol result {i}: {m}")
s = check_no_eager_graphs()
assert s["segmented_graphs"] == 1 and s["collectives"] == 6, s
cases += 1

# ---- tensor parallel, compiled ------------------------------------------------

DIM, HID, BATCH, STEPS = 8, 16, 4, 3


def MLP():
    return NormMLP(DIM, HID)


def batches(n):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(n, DIM, generator=g), torch.randn(n, DIM, generator=g)) for _ in range(STEPS)]


def one_process(model, opt):
    losses = []
    for x, y in batches(BATCH * world):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses, {n: p.detach() for n, p in model.named_parameters()}


def compare(what, got, want):
    for i, (g, w) in enumerate(zip(got[0], want[0])):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what} loss {i}: {m}")
    for name, w in want[1].items():
        torch.testing.assert_close(got[1][name], w, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what} {name}: {m}")


torch.manual_seed(0)
ref_model = MLP()
ref = one_process(ref_model, torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9))

mesh = init_device_mesh("tpu", (world,))
torch.manual_seed(0)
tp = MLP().to("tpu")
parallelize_module(tp, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
# The LayerNorm's parameters stay plain tensors next to DTensors, which the
# foreach kernels refuse (on CUDA as well).
opt = torch.optim.SGD(tp.parameters(), lr=0.1, momentum=0.9, foreach=False)


@torch.compile(backend="tpu")
def tp_loss(x, y):
    return torch.nn.functional.mse_loss(tp(x), y)


before = torch_tpu.compile_stats()
losses = []
for x, y in batches(BATCH * world):  # every rank sees the full batch: tensor parallel splits the weights
    loss = tp_loss(x.to("tpu"), y.to("tpu"))
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.detach().cpu())
params = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu() for n, p in tp.named_parameters()}
compare("tensor parallel", (losses, params), ref)
s = check_no_eager_graphs()
# Forward and backward graphs each hold an all_reduce (the Rowwise output,
# the Colwise input's gradient) and its wait.
assert s["segmented_graphs"] - before["segmented_graphs"] == 2, s
assert s["collectives"] - before["collectives"] == 2, s
cases += 1

def train_on_shards(model, opt):
    """Data-parallel steps: each rank trains on its shard of the batch; the
    losses returned are averaged over the ranks."""
    losses = []
    for x, y in batches(BATCH * world):
        x, y = x.chunk(world)[rank].to("tpu"), y.chunk(world)[rank].to("tpu")
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        full = loss.detach().clone()
        dist.all_reduce(full, dist.ReduceOp.AVG)
        losses.append(full.cpu())
    return losses


# ---- FSDP2 with compiled blocks -----------------------------------------------

torch.manual_seed(0)
ref_model = torch.nn.Sequential(MLP(), MLP())
ref = one_process(ref_model, torch.optim.AdamW(ref_model.parameters(), lr=1e-2))

torch.manual_seed(0)
fsdp = torch.nn.Sequential(MLP(), MLP())
for block in fsdp:
    fully_shard(block, mesh=mesh)
    block.forward = torch.compile(block.forward, backend="tpu")
fully_shard(fsdp, mesh=mesh)
opt = torch.optim.AdamW(fsdp.parameters(), lr=1e-2)
before = torch_tpu.compile_stats()
losses = train_on_shards(fsdp, opt)
params = {n: p.full_tensor().detach().cpu() for n, p in fsdp.named_parameters()}
compare("FSDP2", (losses, params), ref)
s = check_no_eager_graphs()
assert s["compiles"] > before["compiles"], s
cases += 1

# ---- DDP, compiled -------------------------------------------------------------

torch.manual_seed(0)
ref_model = MLP()
ref = one_process(ref_model, torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9))
torch.manual_seed(0)
ddp = torch.nn.parallel.DistributedDataParallel(MLP().to("tpu"))
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
step_model = torch.compile(ddp, backend="tpu")
before = torch_tpu.compile_stats()
losses = train_on_shards(step_model, opt)
compare("DDP", (losses, {n: p.detach().cpu() for n, p in ddp.module.named_parameters()}), ref)
s = check_no_eager_graphs()
assert s["compiles"] > before["compiles"], s
cases += 1

# ---- fused eager: a collective runs the pending cluster first -----------------

with torch_tpu.eager_mode("fused"):
    total = world * (world + 1) / 2
    # The collective's input is pending: reading it runs the cluster.
    b = torch.full((5,), float(rank + 1), device="tpu") * 3
    seen = b + 1            # recorded before the collective: reads b from before it
    dist.all_reduce(b)      # rebinds b's storage to the sum
    after = b * 2
    torch.testing.assert_close(seen.cpu(), torch.full((5,), 3.0 * (rank + 1) + 1))
    torch.testing.assert_close(after.cpu(), torch.full((5,), 6.0 * total))
    # The input is not pending, other work is: the collective runs it.
    b = torch.full((5,), float(rank + 1), device="tpu")
    b.cpu()
    torch_tpu.reset_fused_stats()
    seen = b[1:3] * 2       # pending, reads what the collective rewrites
    other = torch.arange(3.0, device="tpu") + rank
    dist.all_reduce(b)
    assert torch_tpu.fused_stats()["flush_reasons"] == {"collective": 1}, torch_tpu.fused_stats()
    torch.testing.assert_close(seen.cpu(), torch.full((2,), 2.0 * (rank + 1)))
    torch.testing.assert_close(other.cpu(), torch.arange(3.0) + rank)
    torch.testing.assert_close(b.cpu(), torch.full((5,), total))
cases += 1

assert not torch_tpu.fallback_ops(), torch_tpu.fallback_ops()
report(rank, cases)
dist.destroy_process_group()
