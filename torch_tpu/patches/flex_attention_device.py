"""flex_attention on tpu tensors, eager and compiled.

`torch.nn.attention.flex_attention.flex_attention` first checks its query's
device against a fixed list (cuda, cpu, xpu, hpu, mps) and raises for any
other. Past that check nothing is device-specific: in eager mode the
flex_attention higher-order op runs its dense implementation (the score and
mask functions applied with ordinary ATen ops, which tpu runs), and a
compiled call traces the same implementation into the graph, so
torch.compile(backend="tpu") makes it part of the graph's program. The check
is wrapped: a tpu query passes, every other device goes to PyTorch's own
check unchanged.

flex_attention is imported lazily by models that use it, so nothing imports
it here: an import hook wraps the check when the program first imports
torch.nn.attention.flex_attention.
"""
import functools

from . import import_hook
from .record import Patch, mark, marked

NAME = "flex_attention_device"
_TARGET = "torch.nn.attention.flex_attention"


def _wrap(module):
    original = getattr(module, "_validate_device", None)
    if original is None or marked(original, NAME):
        return

    @functools.wraps(original)
    def _validate_device(query, key, value):
        if query.device.type == "tpu":
            return None
        return original(query, key, value)

    module._validate_device = mark(_validate_device, NAME)


def install():
    import_hook.run_after_import(_TARGET, _wrap, NAME)


def installed():
    """The check is wrapped once flex_attention is imported; until then the hook waits for it."""
    return import_hook.wrapped_after_import(_TARGET, "_validate_device", NAME)


PATCH = Patch(
    name=NAME,
    targets=("torch.nn.attention.flex_attention._validate_device", "sys.meta_path"),
    reason=("flex_attention raises for any device outside a fixed list (cuda, cpu, xpu, hpu, mps) before it "
            "does anything device-specific; its dense implementation, eager or traced into a compiled graph, "
            "is ordinary ATen ops that tpu runs. TorchTitan's stock Qwen3 and Llama 3 configs use it. An import "
            "hook wraps the check when torch.nn.attention.flex_attention is first imported, so that importing "
            "torch_tpu does not import it."),
    issue=None,
    versions={"torch": ("2.13.0", "2.14.1")},
    when="import torch_tpu (the hook); first import of torch.nn.attention.flex_attention (the wrapper)",
    scope="only a query on tpu skips the check; every other device goes to PyTorch's check unchanged",
    install=install,
    installed=installed,
)
