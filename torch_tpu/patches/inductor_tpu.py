"""torch.compile(model) with inductor (the default backend) on tpu tensors.

Inductor registers its Pallas code generation for device `tpu`, written for
Google's TorchTPU on a TPU: each kernel is exported for platform 'tpu' as a
Mosaic kernel, which no other PJRT plugin runs, so torch.compile(model)
failed at its first kernel on every other plugin. Two changes, both for tpu
graphs only, chosen by TORCH_TPU_INDUCTOR (auto | pallas | tpu):

- the code generation: through inductor's interface for out-of-tree devices
  (`register_backend_for_device`), the same Pallas scheduling with each
  kernel exported for the plugin in use and interpreted off TPU
  (`torch_tpu.compiler.inductor_pallas`);
- the route: `torch._inductor.compile_fx.compile_fx`, which
  torch.compile(model) calls, hands a graph whose inputs are tpu tensors to
  torch_tpu's compiler (backend="tpu", one XLA program per graph) where
  inductor's Pallas kernels would only be interpreted: "auto" off TPU, and
  "tpu" everywhere. Every other graph goes to inductor unchanged.

Inductor is heavy and optional, so nothing imports it here: import hooks
act when the program first imports torch._inductor.codegen.pallas (which
inductor imports before registering its own backends, so it keeps ours) and
torch._inductor.compile_fx.
"""
import functools
import sys

from . import import_hook
from .record import Patch, mark, marked

NAME = "inductor_tpu"
_CODEGEN = "torch._inductor.codegen.pallas"
_COMPILE = "torch._inductor.compile_fx"


# What became of the code generation: waiting for inductor's Pallas module,
# registered, or skipped (an inductor without that scheduling).
_codegen = "waiting"


def _register_codegen(module):
    global _codegen
    try:
        from torch._inductor.codegen.common import register_backend_for_device
        from torch._inductor.codegen.wrapper import PythonWrapperCodegen

        from torch_tpu.compiler.inductor_pallas import scheduling_class
        scheduling = scheduling_class(module.PallasScheduling)
    except (ImportError, AttributeError):  # an inductor without this Pallas scheduling: keep its own
        _codegen = "skipped"
        return
    register_backend_for_device("tpu", scheduling, PythonWrapperCodegen)
    _codegen = "registered"


def _on_tpu(example_inputs):
    import torch
    return any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in example_inputs)


def to_torch_tpu_compiler() -> bool:
    """Whether inductor's tpu graphs go to torch_tpu's compiler (TORCH_TPU_INDUCTOR)."""
    from torch_tpu import settings
    from torch_tpu._internal.utils.hardware import plugin_platform
    route = settings.get("TORCH_TPU_INDUCTOR")
    return route == "tpu" or (route == "auto" and plugin_platform() != "tpu")


def _wrap_compile(module):
    original = module.compile_fx
    if marked(original, NAME):
        return

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if _on_tpu(example_inputs_) and to_torch_tpu_compiler():
            from torch_tpu.compiler import tpu_backend
            return tpu_backend(model_, example_inputs_)
        return original(model_, example_inputs_, *args, **kwargs)

    module.compile_fx = mark(compile_fx, NAME)


def install():
    import_hook.run_after_import(_CODEGEN, _register_codegen, NAME)
    import_hook.run_after_import(_COMPILE, _wrap_compile, NAME)


def installed():
    """Each part is in place once its module is imported; until then its hook waits."""
    if _CODEGEN in sys.modules and _codegen != "skipped":
        from torch._inductor.codegen.common import get_scheduling_for_device
        scheduling = get_scheduling_for_device("tpu")
        codegen = scheduling is not None and scheduling.__name__ == "PluginPallasScheduling"
    else:
        codegen = _codegen == "skipped" or import_hook.waiting(_CODEGEN)
    module = sys.modules.get(_COMPILE)
    route = marked(module.compile_fx, NAME) if module is not None else import_hook.waiting(_COMPILE)
    return codegen and route


PATCH = Patch(
    name=NAME,
    targets=("torch._inductor.compile_fx.compile_fx", "torch._inductor.codegen.common.device_codegens[tpu]",
             "sys.meta_path"),
    reason=("Inductor's Pallas code generation for device tpu exports every kernel for platform 'tpu' as a Mosaic "
            "kernel, which only libtpu runs, so torch.compile(model) with no backend failed on every other plugin. "
            "The registered scheduling is inductor's own with each kernel exported for the plugin in use "
            "(interpreted off TPU); where its kernels would only be interpreted, compile_fx hands tpu graphs to "
            "torch_tpu's compiler (TORCH_TPU_INDUCTOR). Import hooks act when inductor's modules are first "
            "imported, so that importing torch_tpu does not import inductor."),
    issue=None,
    versions={"torch": ("2.13.0",)},
    when=("import torch_tpu (the hooks); first import of torch._inductor.codegen.pallas (the scheduling) and of "
          "torch._inductor.compile_fx (the route)"),
    scope=("graphs whose inputs are tpu tensors, and inductor's code generation for device tpu; every other "
           "graph and device keeps inductor's own"),
    install=install,
    installed=installed,
)
