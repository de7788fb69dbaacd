"""Gamma and Dirichlet sampling on tpu (_standard_gamma, _sample_dirichlet):
the device's own generator, so samples are compared with the CPU's by
distribution (moments and quantiles), and checked for reproducibility."""
import pytest
import torch
import torch_tpu

from optest import same_error

N = 100_000


@pytest.mark.parametrize("alpha", [0.2, 0.7, 1.0, 3.0, 25.0])
def test_gamma_matches_the_cpu_distribution(alpha):
    torch.manual_seed(3)
    tpu = torch._standard_gamma(torch.full((N,), alpha, device="tpu")).cpu()
    cpu = torch._standard_gamma(torch.full((N,), alpha))
    assert tpu.min() > 0
    # Mean alpha and variance alpha, within 5 standard errors.
    assert abs(tpu.mean().item() - alpha) < 5 * (alpha / N) ** 0.5
    assert abs(tpu.var().item() / alpha - 1) < 0.05
    q = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95])
    torch.testing.assert_close(torch.quantile(tpu, q), torch.quantile(cpu, q), rtol=0.05, atol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 2)])
def test_gamma_shapes_and_dtypes(dtype, shape):
    alpha = (torch.rand(shape) * 3 + 0.1).to(dtype)
    out = torch._standard_gamma(alpha.to("tpu"))
    assert out.device.type == "tpu" and out.dtype == dtype and out.shape == alpha.shape
    assert bool((out.cpu() > 0).all())


def test_dirichlet_mean_and_simplex():
    alpha = torch.tensor([0.5, 2.0, 3.5])
    s = torch._sample_dirichlet(alpha.expand(N, 3).contiguous().to("tpu")).cpu()
    torch.testing.assert_close(s.sum(-1), torch.ones(N), rtol=0, atol=1e-5)
    torch.testing.assert_close(s.mean(0), alpha / alpha.sum(), rtol=0, atol=5e-3)
    d = torch.distributions.Dirichlet(alpha.to("tpu")).sample((4,))
    assert d.device.type == "tpu" and d.shape == (4, 3)


def test_distributions_sample_on_tpu():
    g = torch.distributions.Gamma(torch.tensor([2.0, 5.0], device="tpu"), torch.tensor([1.0, 2.0], device="tpu"))
    s = g.sample((N // 10,))
    assert s.device.type == "tpu"
    torch.testing.assert_close(s.mean(0).cpu(), torch.tensor([2.0, 2.5]), rtol=0.05, atol=0)


def test_seeded_reproducible_and_the_same_in_fused_mode():
    alpha = torch.rand(64, device="tpu") + 0.5
    torch.manual_seed(11)
    a = torch._standard_gamma(alpha).cpu()
    b = torch._standard_gamma(alpha).cpu()
    torch.manual_seed(11)
    with torch_tpu.eager_mode("fused"):
        c = torch._standard_gamma(alpha)
        d = torch._standard_gamma(alpha)
    assert not torch.equal(a, b)
    torch.testing.assert_close(c.cpu(), a)
    torch.testing.assert_close(d.cpu(), b)


def test_integer_alpha_is_refused_like_the_cpu():
    same_error(torch._standard_gamma, torch.ones(3, dtype=torch.int64))
