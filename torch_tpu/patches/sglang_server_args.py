"""SGLang's server arguments for tpu.

SGLang asks the platform for defaults (SRTPlatform.apply_server_args_defaults);
TpuSRTPlatform answers by calling apply(). Only arguments the user left unset
change.
"""
from .record import AppliedByEngine, Patch

NAME = "sglang_server_args"
ATTENTION_BACKEND = "torch_native"
SAMPLING_BACKEND = "pytorch"
_STATE = AppliedByEngine()
install, installed = _STATE.install, _STATE.installed


def apply(server_args):
    """Defaults that keep SGLang on its plain-PyTorch paths on tpu."""
    if getattr(server_args, "attention_backend", None) is None:
        server_args.attention_backend = ATTENTION_BACKEND
    if getattr(server_args, "sampling_backend", None) is None:
        server_args.sampling_backend = SAMPLING_BACKEND
    _STATE.applied()


PATCH = Patch(
    name=NAME,
    targets=("sglang.srt.server_args.ServerArgs.attention_backend",
             "sglang.srt.server_args.ServerArgs.sampling_backend"),
    reason=("Left unset, SGLang picks CUDA kernel backends for attention and sampling (FlashInfer, Triton); on tpu "
            "the torch_native attention (scaled_dot_product_attention over the KV pool) and the pytorch "
            "sampler run as plain ATen ops."),
    issue=None,
    versions={"sglang": ("0.5.23",), "torch": ("2.14.1",)},
    when="SGLang's SRTPlatform.apply_server_args_defaults, when SGLang runs on the tpu platform",
    scope="only arguments the user left unset, of a server that runs on tpu",
    install=install,
    installed=installed,
)
