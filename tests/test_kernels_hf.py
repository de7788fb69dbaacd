"""Hugging Face `kernels` 0.17.2 on tpu: a kernel repository made here (no
hub, no network) declares the tpu backend, its layer is a jax_op, and
kernelize(model, device="tpu") replaces a layer's forward with it; the
result equals torch on the CPU."""
import json
import textwrap

import pytest
import torch

import torch_tpu  # noqa: F401

pytest.importorskip("jax", reason="the jax extra is not installed: bash scripts/setup.sh --jax")
kernels = pytest.importorskip("kernels", reason="HF kernels is not installed: bash scripts/setup.sh --jax")
pytestmark = pytest.mark.skipif(
    not hasattr(torch.backends, "tpu"),
    reason="HF kernels detects the tpu backend by torch.backends.tpu, which torch_tpu/backends_tpu.py adds")

KERNEL_INIT = '''
import jax
import jax.numpy as jnp
from torch_tpu._internal.pallas import jax_op


def _relu(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, 0)


relu = jax_op("hf_relu_tpu::relu", _relu)

from . import layers  # noqa: E402,F401
'''

KERNEL_LAYERS = '''
import torch


class ReLU(torch.nn.Module):
    def forward(self, x):
        from . import relu
        return relu(x)
'''


def make_repo(root):
    variant = root / "build" / "torch-tpu"
    (variant / "hf_relu_tpu").mkdir(parents=True)
    (variant / "metadata.json").write_text(json.dumps({
        "id": "hf_relu_tpu", "name": "hf-relu-tpu", "version": 1, "license": "Apache-2.0",
        "python-depends": [], "backend": {"type": "tpu"}}))
    (variant / "hf_relu_tpu" / "__init__.py").write_text(textwrap.dedent(KERNEL_INIT))
    (variant / "hf_relu_tpu" / "layers.py").write_text(textwrap.dedent(KERNEL_LAYERS))
    return root


def test_kernelize_replaces_a_layer_forward_with_a_tpu_kernel(tmp_path):
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

    repo = make_repo(tmp_path / "relu-repo")

    @use_kernel_forward_from_hub("ReLU")
    class ReLU(torch.nn.Module):
        def forward(self, x):
            return torch.full_like(x, 42.0)  # kernelize must replace this

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), ReLU()).to("tpu")
    with use_kernel_mapping({"ReLU": {"tpu": LocalLayerRepository(repo_path=repo, layer_name="ReLU")}}):
        model = kernelize(model, device="tpu", mode=Mode.INFERENCE)
    x = torch.randn(3, 4)
    ref = torch.relu(torch.nn.functional.linear(x, model[0].weight.cpu(), model[0].bias.cpu()))
    torch.testing.assert_close(model(x.to("tpu")).cpu(), ref)
