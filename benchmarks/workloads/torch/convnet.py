"""(d) Small conv net training step: two 3x3 conv + ReLU + 2x2 max-pool blocks on
3x32x32 images, then a linear classifier; cross-entropy, AdamW."""
import torch.nn.functional as F
from torch import nn

from .. import dims, init
from . import Workload, adamw, load_init, tensor, train_step_fn

BATCH, CHANNELS, CLASSES = dims.convnet.BATCH, dims.convnet.CHANNELS, dims.convnet.CLASSES


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(CHANNELS[0], CHANNELS[1], 3, padding=1)
        self.conv2 = nn.Conv2d(CHANNELS[1], CHANNELS[2], 3, padding=1)
        self.fc = nn.Linear(CHANNELS[2] * (dims.convnet.IMAGE // 4) ** 2, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def loss_fn(model, x, y):
    return F.cross_entropy(model(x), y)


def build(device):
    model = load_init(ConvNet()).to(device)
    x = tensor(init.normal("convnet.x", (BATCH, CHANNELS[0], dims.convnet.IMAGE, dims.convnet.IMAGE)), device)
    y = tensor(init.integers("convnet.y", (BATCH,), CLASSES), device)
    return Workload(train_step_fn(model, adamw(model), loss_fn), (x, y))
