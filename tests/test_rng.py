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


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool, torch.float32,
                                   torch.bfloat16, torch.float16])
def test_random_ranges(dtype):
    torch.tpu.manual_seed(11)
    x = torch.empty(50_000, dtype=dtype, device="tpu")
    lo, hi = (0, 2) if dtype == torch.bool else (-3 if dtype != torch.uint8 else 0, 7)
    r = x.random_(lo, hi).cpu().long()
    assert r.min() == lo and r.max() == hi - 1
    assert torch.equal(r.unique(), torch.arange(lo, hi))
    r = x.random_(5 if dtype != torch.bool else 2).cpu().long()
    assert r.min() == 0 and r.max() == (4 if dtype != torch.bool else 1)
    full = x.random_().cpu()
    if dtype.is_floating_point:
        digits = {torch.float32: 24, torch.bfloat16: 8, torch.float16: 11}[dtype]
        assert full.min() >= 0 and full.max() <= 2 ** digits and torch.equal(full, full.round())
    elif dtype == torch.bool:
        assert 0.45 < full.float().mean() < 0.55
    else:
        info = torch.iinfo(dtype)
        assert full.min() >= 0 and full.max() <= info.max
        assert full.double().mean() > info.max * 0.45


def test_random_from_without_to_and_int64_range():
    torch.tpu.manual_seed(12)
    r = torch.empty(10_000, dtype=torch.int64, device="tpu").random_(-5, None).cpu()
    assert r.min() >= -5 and r.max() > 2 ** 62
    r = torch.empty(10_000, dtype=torch.int8, device="tpu").random_(100, None).cpu()
    assert r.min() == 100 and r.max() == 127
    r = torch.randint(-2 ** 40, 2 ** 40, (10_000,), device="tpu").cpu()
    assert r.min() < -2 ** 39 and r.max() > 2 ** 39


def test_random_bad_range_raises_like_cpu():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="from"):
            torch.randint(5, 2, (3,), device=dev)
        with pytest.raises(RuntimeError):
            torch.empty(3, device=dev).uniform_(2, 1)


def test_other_distributions():
    torch.tpu.manual_seed(13)
    n = 200_000
    e = torch.empty(n, device="tpu").exponential_(2.0).cpu()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.01 and abs(e.std() - 0.5) < 0.01
    g = torch.empty(n, device="tpu").geometric_(0.25).cpu()
    assert g.min() == 1 and torch.equal(g, g.round()) and abs(g.mean() - 4) < 0.05
    ln = torch.empty(n, device="tpu").log_normal_(1.0, 0.5).cpu().log()
    assert abs(ln.mean() - 1) < 0.01 and abs(ln.std() - 0.5) < 0.01
    cy = torch.empty(n, device="tpu").cauchy_(2.0, 0.5).cpu()
    q = cy.quantile(torch.tensor([0.25, 0.5, 0.75]))
    torch.testing.assert_close(q, torch.tensor([1.5, 2.0, 2.5]), atol=0.02, rtol=0)


def test_normal_tensor_forms_and_rand_like():
    torch.tpu.manual_seed(14)
    mean = torch.linspace(-5, 5, 100_000, device="tpu")
    z = (torch.normal(mean, 2.0) - mean).cpu()
    assert abs(z.mean()) < 0.02 and abs(z.std() - 2) < 0.02
    std = torch.full((100_000,), 0.5, device="tpu")
    z = torch.normal(3.0, std).cpu()
    assert abs(z.mean() - 3) < 0.01 and abs(z.std() - 0.5) < 0.01
    z = torch.normal(mean, std).cpu() - mean.cpu()
    assert abs(z.std() - 0.5) < 0.01
    assert torch.normal(torch.ones(5, device="tpu"), 0.0).cpu().eq(1).all()
    r = torch.rand_like(torch.empty(3, 4, dtype=torch.float16, device="tpu"))
    assert r.dtype == torch.float16 and r.device.type == "tpu" and r.shape == (3, 4)
    assert torch.randint_like(torch.empty(1000, device="tpu"), 3, 6).cpu().unique().tolist() == [3.0, 4.0, 5.0]


def test_bernoulli_dtypes_and_edges():
    torch.tpu.manual_seed(15)
    for dtype in (torch.int64, torch.bool, torch.float16, torch.bfloat16):
        b = torch.empty(50_000, dtype=dtype, device="tpu").bernoulli_(0.2).cpu().float()
        assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.2) < 0.01
    assert torch.bernoulli(torch.zeros(1000, device="tpu")).sum() == 0
    assert torch.bernoulli(torch.ones(1000, device="tpu")).sum() == 1000
    p = torch.rand(4, 1000, device="tpu")
    torch.tpu.manual_seed(15)
    a = torch.bernoulli(p).cpu()
    torch.tpu.manual_seed(15)
    assert torch.equal(torch.bernoulli(p).cpu(), a)


def test_randperm_edges_and_dtypes():
    torch.tpu.manual_seed(16)
    assert torch.randperm(0, device="tpu").numel() == 0
    assert torch.randperm(1, device="tpu").cpu().tolist() == [0]
    for dtype in (torch.int32, torch.float32):
        p = torch.randperm(100, dtype=dtype, device="tpu").cpu()
        assert p.dtype == dtype and torch.equal(p.sort().values, torch.arange(100, dtype=dtype))
    a, b = torch.randperm(50, device="tpu").cpu(), torch.randperm(50, device="tpu").cpu()
    assert not torch.equal(a, b)


def test_dropout_forms():
    torch.tpu.manual_seed(17)
    x = torch.ones(100_000, device="tpu")
    assert torch.equal(F.dropout(x, 0.0).cpu(), torch.ones(100_000))
    assert F.dropout(x, 1.0).cpu().eq(0).all()
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), torch.ones(100_000))
    h = F.dropout(torch.ones(100_000, dtype=torch.bfloat16, device="tpu"), 0.5).cpu().float()
    assert set(h.unique().tolist()) <= {0.0, 2.0} and abs((h == 0).float().mean() - 0.5) < 0.01
    y = x.clone()
    F.dropout(y, 0.5, inplace=True)
    assert abs((y.cpu() == 0).float().mean() - 0.5) < 0.01
    w = torch.randn(10_000, device="tpu", requires_grad=True)
    out = F.dropout(w, 0.3)
    out.backward(torch.ones_like(out))
    g, o = w.grad.cpu(), out.detach().cpu()
    assert torch.equal(g == 0, o == 0) and torch.allclose(g[g != 0], torch.tensor(1 / 0.7))
    c = F.dropout2d(torch.ones(4, 64, 3, 3, device="tpu"), 0.5).cpu()
    assert (c.amax((2, 3)) == c.amin((2, 3))).all()  # whole channels are dropped


def test_multinomial_more():
    torch.tpu.manual_seed(18)
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], device="tpu")
    s = torch.multinomial(p, 100_000, replacement=True).cpu()
    freq = s.bincount(minlength=4).float() / 100_000
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.01, rtol=0)
    # Without replacement: the first draw follows p; zero-weight entries are never drawn.
    first = torch.multinomial(p.expand(50_000, 4).contiguous(), 3).cpu()
    assert (first != 1).all()
    f0 = first[:, 0].bincount(minlength=4).float() / 50_000
    torch.testing.assert_close(f0, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.01, rtol=0)
    h = torch.multinomial(torch.ones(3, 8, dtype=torch.bfloat16, device="tpu"), 8).cpu()
    assert (h.sort(1).values == torch.arange(8)).all()
    torch.tpu.manual_seed(5)
    a = torch.multinomial(torch.ones(40, device="tpu"), 10).cpu()
    torch.tpu.manual_seed(5)
    assert torch.equal(torch.multinomial(torch.ones(40, device="tpu"), 10).cpu(), a)
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.ones(3, device=dev), 4)


def test_generator_state_roundtrip_and_fork():
    g = torch.Generator(device="tpu").manual_seed(21)
    a = torch.randn(8, device="tpu", generator=g).cpu()
    state = g.get_state()
    b = torch.randn(8, device="tpu", generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.randn(8, device="tpu", generator=g).cpu(), b) and not torch.equal(a, b)
    torch.tpu.manual_seed(22)
    with torch.random.fork_rng(device_type="tpu"):
        inside = torch.rand(4, device="tpu").cpu()
    assert torch.equal(torch.rand(4, device="tpu").cpu(), inside)
