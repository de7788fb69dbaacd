"""TorchTitan config registry for tpu: `--module tpu_configs --config NAME`.

TorchTitan loads a config function from any importable module given to
`--module` (its documented extension point); TorchTitan itself is unchanged.

`llama3_debugmodel_sdpa` is TorchTitan's `llama3_debugmodel` (same model,
optimizer, schedule, data) with every layer's inner attention set to
TorchTitan's own `ScaledDotProductAttention` (causal over the whole packed
sequence), so that the CPU reference with gloo trains the same model:
PyTorch refuses `flex_attention`'s backward on the CPU (on tpu it runs,
docs/moe.md), and the `varlen` backend calls CUDA's flash/cuDNN kernels in
bfloat16.

`qwen3_moe_debug_sdpa` is TorchTitan's `qwen3_moe_debug` (64 experts, top 8)
with the same SDPA attention and, for expert parallelism, the fixed-capacity
token dispatcher of capacity_dispatcher.py, so that every step runs the same
XLA programs on every rank. With EP 1 the dispatcher is TorchTitan's local one.
Each tpu rank logs the programs it built per step (program_counter.py).
`qwen3_moe_debug_sdpa_2_layers` keeps its first 2 of 8 layers: the same
blocks at about a quarter of the memory, for tests that run beside others.
"""
from torchtitan.models.common.attention import ScaledDotProductAttention
from torchtitan.models.llama3.config_registry import llama3_debugmodel
from torchtitan.models.qwen3.config_registry import qwen3_moe_debug

from capacity_dispatcher import use_capacity_dispatch
from program_counter import count_programs_per_step


def llama3_debugmodel_sdpa():
    config = llama3_debugmodel()
    for layer in config.model_spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    return config


def qwen3_moe_debug_sdpa():
    config = qwen3_moe_debug()
    for layer in config.model_spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    use_capacity_dispatch(config.model_spec.model)
    count_programs_per_step(config.model_spec)
    config.training.disable_cuda_graphs = True  # a CUDA feature; its EP check refuses other dispatchers
    return config


def qwen3_moe_debug_sdpa_2_layers():
    config = qwen3_moe_debug_sdpa()
    del config.model_spec.model.layers[2:]
    return config
