"""torch.compile(model) with no backend (inductor) on tpu tensors.

TORCH_TPU_INDUCTOR picks the route (patch inductor_tpu, docs/compile.md):
"auto" (the default) hands tpu graphs to torch_tpu's compiler on every plugin
but TPU, where inductor's Pallas kernels could only be interpreted; "pallas"
runs inductor's own Pallas kernels on every plugin, exported for the plugin in
use and interpreted off TPU (needs the jax extra); "tpu" always uses
torch_tpu's compiler. Each route equals the CPU, forward and backward."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import settings


class Block(torch.nn.Module):
    """Attention, a norm, a convolution-free MLP and a loss: the ops of a small model."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 32)
        self.qkv = torch.nn.Linear(32, 96)
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 50)

    def forward(self, tokens):
        x = self.emb(tokens)
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 4, 8).permute(2, 0, 3, 1, 4)
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, 32)
        logits = self.down(F.gelu(self.up(self.norm(x))))
        return F.cross_entropy(logits.reshape(-1, 50), tokens.reshape(-1))


def _grads(model):
    return [p.grad.detach().cpu() for p in model.parameters()]


def test_default_route_compiles_tpu_graphs_with_torch_tpus_compiler():
    torch._dynamo.reset()
    torch.manual_seed(0)
    ref = Block()
    model = copy.deepcopy(ref).to("tpu")
    tokens = torch.randint(0, 50, (2, 12))
    before = torch_tpu.compile_stats()["graphs"]
    loss = torch.compile(model)(tokens.to("tpu"))
    loss.backward()
    expected = ref(tokens)
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected.detach())
    for got, want in zip(_grads(model), _grads(ref)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert torch_tpu.compile_stats()["graphs"] > before
    torch._dynamo.reset()


def test_the_route_setting_is_checked():
    assert settings.parse("TORCH_TPU_INDUCTOR", "Pallas") == "pallas"
    with pytest.raises(ValueError, match="TORCH_TPU_INDUCTOR"):
        settings.parse("TORCH_TPU_INDUCTOR", "triton")


PALLAS_ROUTE = textwrap.dedent("""
    import copy, torch, torch.nn.functional as F
    import torch_tpu
    from torch_tpu._internal.pallas import tpu_torch_pallas
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                              torch.nn.Linear(16, 4))
    model = copy.deepcopy(ref).to("tpu")
    x = torch.randn(3, 8)
    before = torch_tpu.compile_stats()["graphs"]
    out = torch.compile(model)(x.to("tpu"))
    out.square().sum().backward()
    want = ref(x)
    want.square().sum().backward()
    torch.testing.assert_close(out.cpu(), want.detach())
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)
    kernels = [name for name, _ in tpu_torch_pallas._kernels]
    assert torch_tpu.compile_stats()["graphs"] == before, "the graph went to torch_tpu's compiler"
    assert any(name.startswith("pallas_") for name in kernels), kernels
    print("OK")
""")


def test_pallas_route_runs_inductors_kernels_through_the_bridge(tmp_path):
    pytest.importorskip("jax", reason="the jax extra is not installed: bash scripts/setup.sh --jax")
    env = dict(os.environ, TORCH_TPU_INDUCTOR="pallas", TORCHINDUCTOR_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-P", "-c", PALLAS_ROUTE], capture_output=True, text=True, env=env,
                       cwd="/", timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_kernel_source_is_retargeted_to_the_plugin():
    from torch_tpu.compiler.inductor_pallas import retarget
    src = ("from torch_tpu._internal.pallas import tpu_torch_pallas\n"
           "k = pl.pallas_call(body, interpret=False)\n"
           "exported = jax.export.export(w, platforms=['tpu'])(a)\n")
    out = retarget(src)
    assert "platforms=[_torch_tpu_platform.platform()]" in out and "interpret=_torch_tpu_platform.interpreted()" in out
    assert "from torch_tpu._internal.pallas import _platform as _torch_tpu_platform" in out
    assert retarget("x = 1\n") == "x = 1\n"
