"""(a) MLP training step: 784 -> 1024 -> 1024 -> 10, GELU, cross-entropy, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import dims, init
from . import Workload, adamw, load_init, tensor, train_step_fn

BATCH, SIZES = dims.mlp.BATCH, dims.mlp.SIZES


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(SIZES[:-1], SIZES[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.gelu(layer(x))
        return self.layers[-1](x)


def loss_fn(model, x, y):
    return F.cross_entropy(model(x), y)


def build(device):
    model = load_init(MLP()).to(device)
    x = tensor(init.normal("mlp.x", (BATCH, SIZES[0])), device)
    y = tensor(init.integers("mlp.y", (BATCH,), SIZES[-1]), device)
    return Workload(train_step_fn(model, adamw(model), loss_fn), (x, y))
