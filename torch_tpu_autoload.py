"""PyTorch's device-backend autoload entry point (`import torch` loads torch_tpu).

A separate top-level module so that a broken torch_tpu install warns instead
of making `import torch` itself fail. TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns
autoload off (a PyTorch setting).
"""


def load():
    try:
        import torch_tpu  # noqa: F401
    except Exception as e:  # pragma: no cover - only on a broken install
        import warnings

        warnings.warn(f"torch_tpu could not be loaded by torch's autoload: {e}")
