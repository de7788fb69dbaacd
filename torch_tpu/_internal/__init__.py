"""Module paths that Google's TorchTPU also has, for the code written against
it: `torch_tpu._internal.pallas` is the bridge that runs JAX functions and
Pallas kernels on tpu tensors (see docs/kernels.md)."""
