"""A tiny language model as a tuner workload (the model form of
torch_tpu/tune/workload.py), for tests/test_tune.py and docs/tune.md: a
200-token vocabulary (not a multiple of 128, so the tuner advises padding),
32 wide, next-token cross-entropy, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, WIDTH, CTX = 200, 32, 16
BATCH_SIZE = 4


class SmallLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.hidden = nn.Linear(WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, idx):
        return self.head(F.gelu(self.hidden(self.embed(idx))))


def make_model():
    torch.manual_seed(0)
    return SmallLM()


def make_batch(batch_size, length=CTX):
    g = torch.Generator().manual_seed(batch_size * 1000 + length)
    tokens = torch.randint(0, VOCAB, (batch_size, length + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss_fn(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
