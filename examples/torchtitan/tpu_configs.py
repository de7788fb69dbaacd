"""TorchTitan config registry for tpu: `--module tpu_configs --config NAME`.

TorchTitan loads a config function from any importable module given to
`--module` (its documented extension point); TorchTitan itself is unchanged.

`llama3_debugmodel_sdpa` is TorchTitan's `llama3_debugmodel` (same model,
optimizer, schedule, data) with every layer's inner attention set to
TorchTitan's own `ScaledDotProductAttention` (causal over the whole packed
sequence). The stock config's two attention backends cannot run here with
torch 2.14.1: `flex_attention` accepts only cuda/cpu/xpu/hpu/mps tensors
(`torch/nn/attention/flex_attention.py`, `_validate_device`) and refuses
backward on the CPU, so neither tpu nor the CPU reference can train it; the
`varlen` backend calls CUDA's flash/cuDNN kernels in bfloat16.
"""
from torchtitan.models.common.attention import ScaledDotProductAttention
from torchtitan.models.llama3.config_registry import llama3_debugmodel


def llama3_debugmodel_sdpa():
    config = llama3_debugmodel()
    for layer in config.model_spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    return config
