"""torch.compile without backend="tpu" on tpu inputs: inductor's code for the
device name "tpu" imports Google TorchTPU's runtime module, whose import path
this package owns; it fails at once with an error that says what to pass."""
import pytest
import torch
import torch_tpu  # noqa: F401


def test_default_backend_says_to_pass_backend_tpu():
    torch._dynamo.reset()
    m = torch.nn.Linear(4, 4).to("tpu")
    fn = torch.compile(lambda x: (m(x).relu() * 2).sum(0))
    with pytest.raises(Exception, match='Pass backend="tpu"'):
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
