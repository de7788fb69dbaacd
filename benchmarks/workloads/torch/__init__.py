"""PyTorch versions of the workloads. Each module has build(device) -> Workload."""
import importlib

import numpy as np
import torch

from .. import init


class Workload:
    """One benchmark step. `step()` runs one training (or decode) step and returns
    its outputs; `check(out)` is a scalar tensor to compare across engines (the
    loss; the logits' sum for decoding). `carry` maps a step's outputs to the next
    step's inputs (decoding feeds its token back). `engine_compile(compile_fn)`
    wraps the step function (torch.compile) before the first step."""

    def __init__(self, fn, args, carry=None, check_of=lambda out: out):
        self.fn, self.args, self.carry, self.check = fn, tuple(args), carry, check_of

    def engine_compile(self, compile_fn):
        self.fn = compile_fn(self.fn)

    def step(self):
        out = self.fn(*self.args)
        if self.carry is not None:
            self.args = tuple(self.carry(out))
        return out


def load_init(model):
    """Overwrite every parameter with the framework-neutral initial value."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(init.param(name, tuple(p.shape))))
    return model


def tensor(array, device):
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=init.LR, betas=init.BETAS,
                             eps=init.EPS, weight_decay=init.WEIGHT_DECAY)


def train_step_fn(model, opt, loss_fn):
    """The training step every training workload times: forward, backward, AdamW."""
    def train_step(*batch):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, *batch)
        loss.backward()
        opt.step()
        return loss.detach()
    train_step.parts = (model, opt, loss_fn)  # for engines that build the step themselves
    return train_step


def build(name, device):
    return importlib.import_module(f"{__name__}.{name}").build(device)
