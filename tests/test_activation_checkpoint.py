"""torch.utils.checkpoint on tpu: the recomputed forward draws the same random
numbers as the original one (checkpoint saves and restores the tpu RNG state
because torch.tpu._initialized says the device is in use)."""
import pytest
import torch
import torch.nn as nn
import torch_tpu  # noqa: F401
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(16, 32), nn.Linear(32, 16), nn.Dropout(0.5)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def _grads(use_checkpoint, use_reentrant, mode):
    torch.manual_seed(0)
    block = Block().to("tpu")
    x = torch.randn(8, 16).to("tpu").requires_grad_()
    torch.tpu.manual_seed(1234)
    with torch_tpu.eager_mode(mode):
        y = checkpoint(block, x, use_reentrant=use_reentrant) if use_checkpoint else block(x)
        y.square().sum().backward()
    return [t.cpu() for t in (y.detach(), x.grad, *[p.grad for p in block.parameters()])]


def test_initialized_follows_the_runtime():
    torch.ones(1, device="tpu").cpu()
    assert torch.tpu._initialized is True
    assert torch.tpu.is_initialized()


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_dropout_under_checkpoint_has_the_plain_gradients(use_reentrant, mode):
    plain = _grads(False, use_reentrant, mode)
    ckpt = _grads(True, use_reentrant, mode)
    for a, b in zip(plain, ckpt):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    # The mask really is random: some activations were dropped.
    assert (plain[0] != 0).any()


def test_checkpoint_restores_the_rng_state_after_recompute():
    torch.tpu.manual_seed(7)
    block = Block().to("tpu")
    x = torch.randn(4, 16, device="tpu", requires_grad=True)
    checkpoint(block, x, use_reentrant=False).sum().backward()
    after = torch.rand(3, device="tpu").cpu()
    torch.tpu.manual_seed(7)
    block(torch.randn(4, 16, device="tpu"))  # the same draws as the forward above, no recompute
    torch.testing.assert_close(torch.rand(3, device="tpu").cpu(), after)
