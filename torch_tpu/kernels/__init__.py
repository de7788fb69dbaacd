"""Kernels that TPU speed needs, written as Pallas kernels and run through the
kernel bridge (torch_tpu._internal.pallas).

- Attention (attention.py): scaled_dot_product_attention's forward and
  backward through JAX's Pallas flash-attention kernel. On a TPU plugin SDPA
  takes it automatically for the calls it fits (csrc/lowering/ops/
  attention_kernel.cpp); on any other plugin the kernel runs through Pallas'
  interpret lowering when asked for (`torch_tpu._sdpa_path.forced("kernel")`),
  which is how it is checked against the XLA lowerings on a machine without
  a TPU.
- Grouped matmul (grouped_matmul.py): torch._grouped_mm, which
  mixture-of-experts layers call, through megablox's gmm and tgmm kernels;
  chosen the same way (`torch_tpu._kernel_paths.grouped_mm("kernel")` forces
  it).

Importing this package costs nothing: JAX is imported, and the kernels
registered, only when a rule first chooses a lowering on a TPU plugin.
"""
import importlib.util
import warnings

from torch_tpu import _C


def _load_for_plugin() -> bool:
    """The kernels' loader: registers them on a TPU plugin with the jax extra
    installed; returns whether it did."""
    from torch_tpu._internal.utils.hardware import plugin_platform
    if plugin_platform() != "tpu":
        return False
    if importlib.util.find_spec("jax") is None:
        warnings.warn("torch_tpu: attention and grouped matmul on TPU use XLA's lowerings, not the Pallas kernels: "
                      "install the jax extra (bash scripts/setup.sh --jax)", stacklevel=2)
        return False
    try:
        from torch_tpu.kernels import attention, grouped_matmul
        attention.register()
        grouped_matmul.register()
    except Exception as e:  # noqa: BLE001 - the rules keep XLA's lowerings; say why
        warnings.warn(f"torch_tpu: the Pallas kernels could not be registered ({type(e).__name__}: {e}); "
                      "attention and grouped matmul use XLA's lowerings", stacklevel=2)
        return False
    return True


_C._set_kernel_loader(_load_for_plugin)
