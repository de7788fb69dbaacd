"""Start-up savings in Dynamo for tpu graphs, installed when the backend is
first used (Dynamo is loaded by then).

- Dynamo's optimizer tracing asks, for every optimizer state tensor, whether
  it is static for CUDA graphs; its helper imports torch._inductor's CUDA
  graph trees and with them most of Inductor (1.3 to 2 s here) before it
  looks at the device. The replacement answers as the helper does for
  tensors that are not on CUDA (True) without that import, and calls the
  original for CUDA tensors.
"""
_installed = False


def install():
    """Installs the replacements (once)."""
    global _installed
    if _installed:
        return
    from torch._dynamo.variables import optimizer

    original = optimizer._is_static_for_cudagraphs

    def is_static_for_cudagraphs(x):
        return original(x) if x.is_cuda else True

    is_static_for_cudagraphs.__wrapped__ = original
    optimizer._is_static_for_cudagraphs = is_static_for_cudagraphs
    _installed = True
