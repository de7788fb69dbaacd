"""Inductor's Pallas code for device tpu, run on the plugin in use.

torch's inductor generates Pallas kernels for device `tpu`
(torch/_inductor/codegen/pallas.py) and hands each to
`tpu_torch_pallas` as a module it exported with `platforms=['tpu']` and
`interpret=False`: a Mosaic kernel only libtpu runs. The scheduling made
here is inductor's own, with each kernel's source made platform-neutral
before inductor defines it: the export targets the platform of the plugin
torch_tpu runs on, and the kernel uses Pallas' interpret lowering off TPU.
On a TPU plugin the kernel is the one inductor wrote. Because the choice is
made when the kernel runs, a kernel from inductor's on-disk cache runs on
whichever plugin loads it.

Registered for device `tpu` by the `inductor_tpu` patch, with inductor's
PallasScheduling passed in (this module imports no inductor, so the patch
can build the class while inductor's module is still being imported).
"""
import functools
import importlib.util

_EXPORT_FOR_TPU = "platforms=['tpu']"
_MOSAIC = "interpret=False"
_BRIDGE_IMPORT = "from torch_tpu._internal.pallas import tpu_torch_pallas"
_PLATFORM_IMPORT = "from torch_tpu._internal.pallas import _platform as _torch_tpu_platform"


def retarget(src: str) -> str:
    """A kernel source inductor wrote for TPU, exported for the plugin's
    platform and interpreted off TPU. Sources without the export (none is
    expected) are returned as they are."""
    if _EXPORT_FOR_TPU not in src or _BRIDGE_IMPORT not in src:
        return src
    src = src.replace(_EXPORT_FOR_TPU, "platforms=[_torch_tpu_platform.platform()]")
    src = src.replace(_MOSAIC, "interpret=_torch_tpu_platform.interpreted()")
    return src.replace(_BRIDGE_IMPORT, _BRIDGE_IMPORT + "\n" + _PLATFORM_IMPORT, 1)


@functools.cache
def scheduling_class(pallas_scheduling):
    """Inductor's `pallas_scheduling` class with its kernels retargeted."""

    class PluginPallasScheduling(pallas_scheduling):
        """Inductor's Pallas scheduling, its kernels retargeted (see torch_tpu/compiler/inductor_pallas.py)."""

        def __init__(self, scheduler):
            if importlib.util.find_spec("jax") is None:
                raise RuntimeError("torch.compile(model) on tpu tensors uses inductor's Pallas code generation, "
                                   "which needs JAX: install the jax extra (bash scripts/setup.sh --jax), or pass "
                                   "backend='tpu' (torch_tpu's own compiler, no JAX needed)")
            super().__init__(scheduler)

        def define_kernel(self, src_code, node_schedule, kernel):
            return super().define_kernel(retarget(src_code), node_schedule, kernel)

    return PluginPallasScheduling
