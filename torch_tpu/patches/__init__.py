"""Every change torch_tpu makes to PyTorch's or another library's behaviour.

One module per patch, each declaring a `PATCH` record (record.py): its
targets, reason, upstream issue, the versions it was checked on, when it is
installed, what it touches, `install()` (idempotent) and `installed()`.
Nothing outside this folder may replace, wrap or register over another
library's objects; tests/test_patches.py fails when something does.

    torch_tpu.patches()   # [Status(name, target, reason, issue, versions, installed), ...]

This package is callable: torch_tpu.patches() lists the patches and whether
each is installed now. docs/patches.md is rendered from the records
(python -m torch_tpu.patches.doc).

Patches named "import torch_tpu" are installed by install_at_import(); the
others are installed where their moment comes (the first tpu torch.compile,
a vLLM or SGLang engine on tpu), by the code that needs them.
"""
import sys
import types

from . import (
    accelerate_device,
    autograd_flush,
    data_parallel,
    dynamo_cudagraph_check,
    flex_attention_device,
    inductor_tpu,
    multilabel_margin_tracing,
    safetensors_load,
    sglang_server_args,
    thread_local_world,
    vllm_config,
    vllm_cuda_streams,
    vllm_kv_cache,
    xla_log_level,
)
from .record import Patch, Status  # noqa: F401

RECORDS = tuple(m.PATCH for m in (
    xla_log_level,
    data_parallel,
    autograd_flush,
    safetensors_load,
    dynamo_cudagraph_check,
    multilabel_margin_tracing,
    vllm_cuda_streams,
    vllm_kv_cache,
    vllm_config,
    sglang_server_args,
    accelerate_device,
    thread_local_world,
    inductor_tpu,
    flex_attention_device,
))


def install_at_import():
    """Installs the patches whose moment is `import torch_tpu`, after the
    extension has loaded (xla_log_level is installed before it loads)."""
    for module in (safetensors_load, data_parallel, autograd_flush, accelerate_device, inductor_tpu,
                   flex_attention_device):
        module.install()


def listing():
    """[Status(name, target, reason, issue, versions, installed)] for every patch."""
    return [Status(r.name, ", ".join(r.targets), r.reason, r.issue, dict(r.versions), bool(r.installed()))
            for r in RECORDS]


class _CallableModule(types.ModuleType):
    """torch_tpu.patches is this package; calling it lists the patches."""

    def __call__(self):
        return listing()


sys.modules[__name__].__class__ = _CallableModule
