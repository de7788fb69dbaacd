"""torch.poisson on tpu: the device's own generator, so samples are compared
with the CPU's by distribution (moments and quantiles, on both sides of the
rate-10 switch between the two methods), and checked for reproducibility."""
import pytest
import torch
import torch_tpu

from optest import same_error

N = 100_000


@pytest.mark.parametrize("rate", [0.3, 2.0, 9.5, 10.0, 37.0, 500.0])
def test_poisson_matches_the_cpu_distribution(rate):
    torch.manual_seed(5)
    tpu = torch.poisson(torch.full((N,), rate, device="tpu")).cpu()
    cpu = torch.poisson(torch.full((N,), rate))
    assert torch.equal(tpu, tpu.round()) and tpu.min() >= 0
    assert abs(tpu.mean().item() - rate) < 5 * (rate / N) ** 0.5
    assert abs(tpu.var().item() / rate - 1) < 0.05
    q = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95])
    torch.testing.assert_close(torch.quantile(tpu, q), torch.quantile(cpu, q), rtol=0.05, atol=1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 2)])
def test_poisson_shapes_dtypes_and_zero_rate(dtype, shape):
    rates = (torch.rand(shape) * 20).to(dtype)
    if rates.numel():
        rates.view(-1)[0] = 0
    out = torch.poisson(rates.to("tpu"))
    assert out.device.type == "tpu" and out.dtype == dtype and out.shape == rates.shape
    if rates.numel():
        assert out.cpu().view(-1)[0].item() == 0


def test_seeded_reproducible_and_the_same_in_fused_mode():
    rates = torch.rand(64, device="tpu") * 30
    torch.manual_seed(2)
    a, b = torch.poisson(rates).cpu(), torch.poisson(rates).cpu()
    torch.manual_seed(2)
    with torch_tpu.eager_mode("fused"):
        c, d = torch.poisson(rates), torch.poisson(rates)
    assert not torch.equal(a, b)
    torch.testing.assert_close(c.cpu(), a)
    torch.testing.assert_close(d.cpu(), b)


def test_integer_rates_are_refused_like_the_cpu():
    same_error(torch.poisson, torch.ones(3, dtype=torch.int64))
