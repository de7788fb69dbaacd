"""Inductor's target for the device name "tpu".

torch.compile's default backend, inductor, generates Pallas kernels for the
device name "tpu" and imports their runtime from `torch_tpu._internal.pallas` (this module),
the module path of Google's TorchTPU, which shares this package's name. This
torch_tpu compiles whole graphs to XLA itself, so that import ends here with
an error that says what to pass instead."""

raise RuntimeError(
    "torch_tpu: torch.compile's default backend (inductor) cannot compile for this tpu device. "
    "Pass backend=\"tpu\": torch.compile(model, backend=\"tpu\") compiles each graph into one XLA program.")
