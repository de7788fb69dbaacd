"""torch_tpu._internal: modules at the paths Google's TorchTPU gives them, so
that code written for it imports them here unchanged: ``sync``
(``synchronize(t, wait=True)``) and ``pallas``, the bridge that runs JAX
functions and Pallas kernels on tpu tensors (docs/kernels.md)."""
