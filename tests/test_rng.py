"""Random numbers: seeded, reproducible, with the right distributions."""
import pytest
import torch
import torch.nn.functional as F


def test_same_seed_same_numbers():
    torch.tpu.manual_seed(123)
    a = torch.randn(1000, device="tpu").cpu()
    torch.tpu.manual_seed(123)
    b = torch.randn(1000, device="tpu").cpu()
    torch.tpu.manual_seed(124)
    c = torch.randn(1000, device="tpu").cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_successive_draws_differ_and_state_replays():
    torch.tpu.manual_seed(7)
    state = torch.tpu.get_rng_state()
    a = torch.rand(64, device="tpu").cpu()
    b = torch.rand(64, device="tpu").cpu()
    assert not torch.equal(a, b)
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(64, device="tpu").cpu(), a)
    assert torch.tpu.initial_seed() == 7


def test_torch_manual_seed_seeds_tpu():
    torch.manual_seed(5)
    a = torch.rand(8, device="tpu").cpu()
    torch.manual_seed(5)
    assert torch.equal(torch.rand(8, device="tpu").cpu(), a)


def test_explicit_generator():
    g = torch.Generator(device="tpu").manual_seed(3)
    a = torch.rand(16, device="tpu", generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(torch.rand(16, device="tpu", generator=g).cpu(), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_uniform_and_normal_moments(dtype):
    torch.tpu.manual_seed(0)
    u = torch.rand(200_000, device="tpu", dtype=dtype).float().cpu()
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    n = torch.randn(200_000, device="tpu", dtype=dtype).float().cpu()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    x = torch.empty(100_000, device="tpu", dtype=dtype).uniform_(-2, 3).float().cpu()
    assert -2 <= x.min() and x.max() <= 3 and abs(x.mean() - 0.5) < 0.03
    y = torch.empty(100_000, device="tpu", dtype=dtype).normal_(4, 0.5).float().cpu()
    assert abs(y.mean() - 4) < 0.02 and abs(y.std() - 0.5) < 0.02


def test_bernoulli_randint_dropout():
    torch.tpu.manual_seed(1)
    b = torch.empty(100_000, device="tpu").bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    p = torch.full((50_000,), 0.8, device="tpu")
    assert abs(torch.bernoulli(p).cpu().mean() - 0.8) < 0.01
    r = torch.randint(3, 9, (50_000,), device="tpu").cpu()
    assert r.min() == 3 and r.max() == 8 and r.dtype == torch.int64
    d = F.dropout(torch.ones(100_000, device="tpu"), 0.25, training=True).cpu()
    assert set(d.unique().tolist()) <= {0.0, torch.tensor(1 / 0.75).item()} and abs((d == 0).float().mean() - 0.25) < 0.01


def test_randperm_and_multinomial():
    torch.tpu.manual_seed(2)
    p = torch.randperm(1000, device="tpu").cpu()
    assert torch.equal(p.sort().values, torch.arange(1000)) and not torch.equal(p, torch.arange(1000))
    w = torch.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]], device="tpu")
    s = torch.multinomial(w, 4000, replacement=True).cpu()
    counts = s[0].bincount(minlength=3).float() / 4000
    assert counts[0] == 0 and abs(counts[2] - 0.75) < 0.03 and (s[1] == 0).all()
    no_rep = torch.multinomial(torch.ones(5, 10, device="tpu"), 10).cpu()
    assert (no_rep.sort(dim=1).values == torch.arange(10)).all()
    assert set(torch.multinomial(w[0], 2).cpu().tolist()) == {1, 2}
