"""torch.compile without backend="tpu" on tpu inputs: inductor generates
Pallas kernels for the device name "tpu" and exports them as Mosaic TPU
kernels, which needs a TPU; on the CPU plugin JAX's Mosaic lowering refuses
(naming the device kind), while backend="tpu" compiles the same function.
(Without the jax extra, inductor's import of torch_tpu._internal.pallas
fails with an ImportError naming `bash scripts/setup.sh --jax`.)"""
import pytest
import torch
import torch_tpu  # noqa: F401


def test_default_backend_fails_clearly_off_tpu():
    torch._dynamo.reset()
    m = torch.nn.Linear(4, 4).to("tpu")
    fn = torch.compile(lambda x: (m(x).relu() * 2).sum(0))
    with pytest.raises(Exception, match="TPU device kind: cpu|bash scripts/setup.sh --jax"):
        fn(torch.randn(2, 4, device="tpu"))
    torch._dynamo.reset()


def test_backend_tpu_compiles_the_same_function():
    torch._dynamo.reset()
    m = torch.nn.Linear(4, 4).to("tpu")
    x = torch.randn(2, 4)
    fn = torch.compile(lambda x: (m(x).relu() * 2).sum(0), backend="tpu")
    ref = (torch.nn.functional.linear(x, m.weight.cpu(), m.bias.cpu()).relu() * 2).sum(0)
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), ref)
    torch._dynamo.reset()
