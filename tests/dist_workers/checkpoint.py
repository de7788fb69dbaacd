"""torch.distributed.checkpoint of an FSDP2 model and its AdamW state on
tpu: save at step N, load into a freshly built (differently initialised)
model and optimizer, and the following steps equal the uninterrupted run.

argv[1]: the checkpoint folder (shared by the ranks)."""

import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import torch_tpu
from _common import rank_world, report

folder = sys.argv[1]
rank, world = rank_world()
dist.init_process_group("tpu_dist")
mesh = init_device_mesh("tpu", (world,))
DIM, STEPS, SAVE_AT = 8, 5, 2


def build(seed, meta=False):
    """The sharded model and its optimizer. `meta`: built on the meta device,
    sharded, then materialised on tpu and initialised (as TorchTitan does)."""
    torch.manual_seed(seed)
    with torch.device("meta" if meta else "cpu"):
        model = torch.nn.Sequential(torch.nn.Linear(DIM, 3 * DIM), torch.nn.LayerNorm(3 * DIM), torch.nn.GELU(),
                                    torch.nn.Linear(3 * DIM, DIM))
    for layer in (model[0], model[3]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if meta:
        model.to_empty(device="tpu")
        for layer in (model[0], model[1], model[3]):
            layer.reset_parameters()
        assert all(p.device.type == "tpu" for p in model.parameters())
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def batch(step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(4, DIM, generator=g).to("tpu"), torch.randn(4, DIM, generator=g).to("tpu")


def train(model, opt, steps):
    losses = []
    for step in steps:
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().cpu())
    return losses


def full_params(model):
    return [p.full_tensor().detach().cpu() for p in model.parameters()]


# The uninterrupted run.
model, opt = build(0)
want_losses = train(model, opt, range(STEPS))
want_params = full_params(model)

# Train to SAVE_AT and save the sharded model and optimizer state.
model, opt = build(0)
train(model, opt, range(SAVE_AT))
model_sd, optim_sd = get_state_dict(model, opt)
dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=folder)
saved_params = full_params(model)
del model, opt, model_sd, optim_sd

# A fresh model (built on the meta device, other initial values, no
# optimizer state) loads and resumes.
model, opt = build(1, meta=True)
assert not all(torch.equal(a, b) for a, b in zip(full_params(model), saved_params))
model_sd, optim_sd = get_state_dict(model, opt)
state = {"model": model_sd, "optim": optim_sd}
dcp.load(state, checkpoint_id=folder)
set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
for got, want in zip(full_params(model), saved_params):
    assert torch.equal(got, want), "loaded parameters differ from the saved ones"
got_losses = train(model, opt, range(SAVE_AT, STEPS))

for step, (got, want) in enumerate(zip(got_losses, want_losses[SAVE_AT:]), SAVE_AT):
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=lambda m: f"step {step} loss: {m}")
for i, (got, want) in enumerate(zip(full_params(model), want_params)):
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=lambda m: f"param {i}: {m}")
assert not torch_tpu.fallback_ops(), torch_tpu.fallback_ops()
report(rank, STEPS - SAVE_AT + len(want_params))
dist.destroy_process_group()
