"""Fused eager mode (torch_tpu.set_eager_mode("fused")): ops are recorded
into a cluster and run as one program when a value is observed; results,
views, in-place semantics, RNG streams and errors are those of op-by-op
eager. The model zoo's fused runs are in test_models.py."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


def program(dev):
    """A mix of what eager code does: views, in-place writes through views,
    broadcasting, reductions, dtype changes, an empty tensor, and a
    Python-number scalar."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 8, generator=g).to(dev)
    w = torch.randn(8, 5, generator=g).to(dev)
    y = (x @ w).relu_()
    v = y[1:4, ::2]
    v.mul_(3).add_(0.5)  # writes into y through a strided view
    t = y.t()
    t[0].fill_(-1)       # and through a transposed one
    z = y.sum(0, keepdim=True) / y.abs().amax() + torch.arange(5, device=dev)
    i = (z > 0).to(torch.int64).cumsum(1)
    e = x[:0].sum(0)
    s = x.view(2, 3, 8).permute(2, 0, 1).contiguous().flatten()
    return [y, v, z, i, e, s, x.clone().masked_fill_(x > 1, 2.0)]


def test_program_matches_strict_eager_and_cpu(fused):
    expected = program("cpu")
    strict = None
    with torch_tpu.eager_mode("strict"):
        strict = [t.cpu() for t in program("tpu")]
    actual = [t.cpu() for t in program("tpu")]
    for a, s, e in zip(actual, strict, expected):
        torch.testing.assert_close(a, e)
        torch.testing.assert_close(a, s)
    stats = torch_tpu.fused_stats()
    assert stats["ops"] >= 15 and stats["clusters"] >= 1


def test_clusters_are_cached_by_op_sequence_and_shapes(fused):
    x = torch.randn(4, 4, device="tpu")
    torch.tpu.synchronize()  # x's own program is not part of what repeats

    def run(x):
        return ((x * 2).exp() + x).sum().item()

    run(x)
    before = torch_tpu.fused_stats()
    for _ in range(3):
        run(x)
    after = torch_tpu.fused_stats()
    assert after["compiles"] == before["compiles"]
    assert after["hits"] == before["hits"] + 3
    run(torch.randn(5, 4, device="tpu"))  # a new shape is a new program
    assert torch_tpu.fused_stats()["compiles"] == after["compiles"] + 1


def test_a_changing_scalar_does_not_recompile(fused):
    x = torch.ones(3, device="tpu")
    torch.tpu.synchronize()
    x.mul(0.5).cpu()
    compiles = torch_tpu.fused_stats()["compiles"]
    for lr in (0.1, 0.01, 0.001):
        assert torch.allclose(x.mul(lr).cpu(), torch.full((3,), lr))
    assert torch_tpu.fused_stats()["compiles"] == compiles


def test_nothing_runs_until_a_value_is_observed(fused):
    x = torch.randn(16, device="tpu")
    y = x.sin().cos()
    stats = torch_tpu.fused_stats()
    assert stats["pending_ops"] >= 2 and stats["clusters"] == 0
    print(y)  # printing observes
    stats = torch_tpu.fused_stats()
    assert stats["pending_ops"] == 0 and stats["flush_reasons"].get("read", 0) >= 1


def test_synchronize_and_mode_switch_flush(fused):
    x = torch.randn(8, device="tpu").exp()
    torch.tpu.synchronize()
    assert torch_tpu.fused_stats()["flush_reasons"] == {"synchronize": 1}
    y = x + 1
    torch_tpu.set_eager_mode("strict")
    assert torch_tpu.fused_stats()["flush_reasons"].get("mode") == 1
    torch_tpu.set_eager_mode("fused")
    torch.testing.assert_close(y.cpu(), x.cpu() + 1)


def test_dead_results_are_not_computed(fused):
    x = torch.randn(8, device="tpu")
    torch.tpu.synchronize()
    for _ in range(3):
        (x * 2).exp()  # dropped at once
    torch.tpu.synchronize()
    stats = torch_tpu.fused_stats()
    assert stats["empty"] == 1 and stats["clusters"] == 2


def test_backward_ends_a_cluster_and_gradients_match(fused):
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    dev = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3)).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    x, y = torch.randn(4, 8), torch.tensor([0, 2, 1, 0])
    F.cross_entropy(cpu(x), y).backward()
    F.cross_entropy(dev(x.to("tpu")), y.to("tpu")).backward()
    assert torch_tpu.fused_stats()["flush_reasons"].get("backward") == 1
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, rtol=1e-4, atol=1e-5)


def test_training_loop_matches_strict_eager_and_reuses_its_programs(fused):
    def train(steps):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4)).to("tpu")
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        torch.tpu.manual_seed(7)
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(steps):
            x, y = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
            loss = F.cross_entropy(m(x.to("tpu")), y.to("tpu"))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in m.parameters()]

    fused_losses, fused_params = train(6)
    steady = torch_tpu.fused_stats()["compiles"]
    train(6)
    # The same clusters again, but for the second run's first step: an
    # optimizer step has ended a cluster in this process, so its backward no
    # longer does, and forward, backward and AdamW's state creation are one
    # new cluster.
    assert torch_tpu.fused_stats()["compiles"] == steady + 1
    with torch_tpu.eager_mode("strict"):
        strict_losses, strict_params = train(6)
    # Dropout draws the same numbers in both modes.
    torch.testing.assert_close(fused_losses, strict_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(fused_params, strict_params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_random_streams_match_strict_eager(fused):
    def draw():
        torch.tpu.manual_seed(11)
        a = torch.randn(5, device="tpu")
        b = torch.rand(3, 3, device="tpu")
        c = torch.empty(7, device="tpu").uniform_(-1, 1)
        return [t.cpu() for t in (a, b, c)]

    got = draw()
    with torch_tpu.eager_mode("strict"):
        want = draw()
    for x, y in zip(got, want):
        assert torch.equal(x, y)


def test_one_random_scheme_in_every_mode(fused):
    """A seed gives the same numbers in strict eager, fused eager and a
    torch.compile graph; a second generator or a new seed inside a cluster
    starts a new counter range (the cluster runs first), as op by op."""
    def draws(x):
        a = torch.nn.functional.dropout(x, 0.5)
        b = torch.rand_like(x) + torch.randn(3, 4, device=x.device)
        c = x.clone().bernoulli_(0.3)
        return [a, b, c]

    def run(fn):
        torch.tpu.manual_seed(5)
        x = torch.ones(3, 4, device="tpu")
        return [t.cpu() for t in fn(x)]

    fused_out = run(draws)
    with torch_tpu.eager_mode("strict"):
        strict_out = run(draws)
        compiled_out = run(torch.compile(draws, backend="tpu"))
    for a, b, c in zip(strict_out, fused_out, compiled_out):
        assert torch.equal(a, b)
        # The same draws; XLA may round the arithmetic on them differently
        # inside one larger program.
        torch.testing.assert_close(c, a, rtol=1e-6, atol=1e-6)

    def interleaved():
        g = torch.Generator(device="tpu").manual_seed(9)
        torch.tpu.manual_seed(1)
        a = torch.rand(4, device="tpu")
        b = torch.rand(4, device="tpu", generator=g)
        c = torch.rand(4, device="tpu")
        torch.tpu.manual_seed(1)
        d = torch.rand(4, device="tpu")
        return [t.cpu() for t in (a, b, c, d)]

    before = torch_tpu.fused_stats()["flush_reasons"].get("rng", 0)
    got = interleaved()
    assert torch_tpu.fused_stats()["flush_reasons"].get("rng", 0) > before
    with torch_tpu.eager_mode("strict"):
        want = interleaved()
    for x, y in zip(got, want):
        assert torch.equal(x, y)
    assert torch.equal(got[0], got[3]) and not torch.equal(got[0], got[2])


def test_errors_raise_at_the_op_that_caused_them(fused):
    a = torch.randn(2, 3, device="tpu")
    b = torch.randn(4, 5, device="tpu")
    c = a.exp()
    with pytest.raises(RuntimeError, match="broadcast"):
        a + b  # raised when recorded, not at the next flush
    with pytest.raises(RuntimeError, match="same reduction dim|cannot be multiplied"):
        a @ a
    with pytest.raises(IndexError):
        a[5]
    torch.testing.assert_close(c.cpu(), a.cpu().exp())  # the cluster is unharmed


def test_cpu_fallback_and_host_reads_inside_fused_code(fused):
    x = torch.tensor([3.0, -1.0, 2.0, 0.0], device="tpu") * 2
    assert x.nonzero().flatten().tolist() == [0, 1, 2]
    assert x[x > 0].cpu().tolist() == [6.0, 4.0]
    assert x.max().item() == 6.0
    assert bool((x == 6).any())


def test_set_eager_mode_rejects_unknown_modes():
    with pytest.raises(ValueError, match="strict"):
        torch_tpu.set_eager_mode("lazy")
    assert torch_tpu.get_eager_mode() == "strict"


def run_env(code, **env):
    full = dict(os.environ, **env)
    # cwd "/": from the repository root `import torch_tpu` would find the source
    # tree (no _C) before the installed package.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300,
                         cwd="/")
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_environment_variables_select_the_mode_and_cluster_size():
    code = ("import torch, torch_tpu\n"
            "x = torch.ones(4, device='tpu')\n"
            "for _ in range(9): x = x + 1\n"
            "print(torch_tpu.get_eager_mode(), x.sum().item(), torch_tpu.fused_stats()['flush_reasons'])\n")
    out = run_env(code, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_FUSED_MAX_OPS="4")
    assert out.startswith("fused 40.0") and "'size': 2" in out and "'read': 1" in out


def test_launch_blocking_runs_every_op_synchronously():
    code = ("import torch, torch_tpu\n"
            "x = torch.ones(4, device='tpu').exp()\n"
            "print(torch_tpu.fused_stats()['ops'], torch_tpu._C._launch_blocking())\n")
    out = run_env(code, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_LAUNCH_BLOCKING="1")
    assert out.split() == ["0", "True"]
