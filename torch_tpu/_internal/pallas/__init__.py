"""The kernel bridge: JAX functions and Pallas kernels as PyTorch operators on
tpu tensors, with the names and signatures of Google's TorchTPU
(`torch_tpu._internal.pallas`), so code written for that build runs here.

JAX only traces and lowers a kernel to StableHLO, for the platform of the
PJRT plugin in use. torch_tpu compiles that module through its own runtime
and program cache and runs it on the tensors' own device buffers (no DLPack,
no host copy). In fused eager mode and in torch.compile(backend="tpu")
graphs the kernel is a call inside the one program. docs/kernels.md has the
details.

JAX is an optional extra; without it this import raises ImportError (so that
probing code's `except ImportError` works)."""

try:
    import jax  # noqa: F401
    import jax.export  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "torch_tpu._internal.pallas needs JAX, an optional extra of torch_tpu: install it with "
        "`bash scripts/setup.sh --jax` (jax and jaxlib pinned in requirements-jax.txt)") from e

from torch_tpu._internal.pallas import tpu_torch_pallas  # noqa: E402
from torch_tpu._internal.pallas.pallas import (  # noqa: E402
    JaxCallable,
    _get_kernel_invocation_key,
    custom_jax_kernel,
    custom_kernel,
    jax_op,
    jax_placeholder,
    jax_placeholders,
    torch_placeholder,
)

__all__ = [
    "JaxCallable", "custom_jax_kernel", "custom_kernel", "jax_op", "jax_placeholder", "jax_placeholders",
    "torch_placeholder", "tpu_torch_pallas", "_get_kernel_invocation_key",
]
