"""Mixed precision on tpu: torch.autocast("tpu") follows CUDA's op policy, the
GradScaler ops match PyTorch's CPU kernels, and an fp16 training loop with
torch.amp.GradScaler("tpu") makes the CPU's scaler decisions, with zero
CPU fallbacks."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_tpu

LOW = "low"    # runs in the autocast dtype
FP32 = "fp32"  # runs in float32
SAME = "same"  # no autocast kernel: runs in its inputs' dtype


def _inputs(device):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(device)  # noqa: E731
    return {
        "a": r(4, 8), "b": r(8, 5), "v": r(8), "bat": r(2, 4, 8), "bbt": r(2, 8, 3),
        "img": r(2, 3, 6, 6), "wconv": r(4, 3, 3, 3), "wlin": r(5, 8), "blin": r(5),
        "pos": r(4, 8).abs() + 0.1, "tgt": torch.randint(0, 8, (4,), generator=g).to(device),
        "q": r(1, 2, 4, 8), "k": r(1, 2, 4, 8), "vv": r(1, 2, 4, 8),
    }


# (name, function of the inputs, policy under CUDA's autocast lists: ATen/autocast_mode.h)
POLICY = [
    ("mm", lambda t: torch.mm(t["a"], t["b"]), LOW),
    ("matmul", lambda t: t["a"] @ t["b"], LOW),
    ("bmm", lambda t: torch.bmm(t["bat"], t["bbt"]), LOW),
    ("addmm", lambda t: torch.addmm(t["blin"], t["a"], t["b"]), LOW),
    ("baddbmm", lambda t: torch.baddbmm(t["bat"] @ t["bbt"], t["bat"], t["bbt"]), LOW),
    ("mv", lambda t: torch.mv(t["a"], t["v"]), LOW),
    ("linear", lambda t: F.linear(t["a"], t["wlin"], t["blin"]), LOW),
    ("conv2d", lambda t: F.conv2d(t["img"], t["wconv"], padding=1), LOW),
    ("sdpa", lambda t: F.scaled_dot_product_attention(t["q"], t["k"], t["vv"], is_causal=True), LOW),
    ("softmax", lambda t: torch.softmax(t["a"], -1), FP32),
    ("log_softmax", lambda t: F.log_softmax(t["a"], -1), FP32),
    ("layer_norm", lambda t: F.layer_norm(t["a"], (8,)), FP32),
    ("group_norm", lambda t: F.group_norm(t["img"], 3), FP32),
    ("exp", lambda t: torch.exp(t["a"]), FP32),
    ("log", lambda t: torch.log(t["pos"]), FP32),
    ("rsqrt", lambda t: torch.rsqrt(t["pos"]), FP32),
    ("pow", lambda t: t["pos"] ** 2.5, FP32),
    ("sum", lambda t: t["a"].sum(), FP32),
    ("cumsum", lambda t: t["a"].cumsum(1), FP32),
    ("mse_loss", lambda t: F.mse_loss(t["a"], t["pos"]), FP32),
    ("l1_loss", lambda t: F.l1_loss(t["a"], t["pos"]), FP32),
    ("smooth_l1_loss", lambda t: F.smooth_l1_loss(t["a"], t["pos"]), FP32),
    ("cross_entropy", lambda t: F.cross_entropy(t["a"], t["tgt"]), FP32),
    ("nll_loss", lambda t: F.nll_loss(t["a"], t["tgt"]), FP32),
    ("huber_loss", lambda t: F.huber_loss(t["a"], t["pos"]), FP32),
    ("softplus", lambda t: F.softplus(t["a"]), FP32),
    ("bce_with_logits", lambda t: F.binary_cross_entropy_with_logits(t["a"], t["pos"].clamp(0, 1)), FP32),
    ("relu", lambda t: torch.relu(t["a"]), SAME),
    ("add", lambda t: t["a"] + t["pos"], SAME),
    ("gelu", lambda t: F.gelu(t["a"]), SAME),
]


def _cast_all(t, dtype):
    return {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in t.items()}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name,fn,policy", POLICY, ids=[p[0] if isinstance(p, tuple) else None for p in POLICY])
def test_policy_matches_cuda(name, fn, policy, dtype):
    """Result dtype follows CUDA's policy, and the value is what the CPU computes
    from inputs cast the way the policy says."""
    with torch.autocast("tpu", dtype=dtype):
        out = fn(_inputs("tpu"))
    expect_dtype = dtype if policy == LOW else torch.float32
    assert out.dtype == expect_dtype, f"{name}: {out.dtype}, CUDA's policy gives {expect_dtype}"
    ref = fn(_cast_all(_inputs("cpu"), dtype)) if policy == LOW else fn(_inputs("cpu"))
    tol = {torch.bfloat16: 1.6e-2, torch.float16: 1e-3}[dtype] if policy == LOW else 1.3e-6
    torch.testing.assert_close(out.cpu(), ref, rtol=tol, atol=tol * 4)
    assert torch_tpu.fallback_ops() == {}


def test_low_precision_inputs_promote_and_pass_through():
    x = torch.randn(4, 8, device="tpu")
    w = torch.randn(8, 8, device="tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        y = x @ w                       # bf16
        assert torch.relu(y).dtype == torch.bfloat16          # no policy: stays bf16
        assert torch.addcmul(x, y, y).dtype == torch.float32  # promote: widest input
        assert torch.cat([y, x]).dtype == torch.float32       # cat promotes by itself
        assert (y.float() @ w).dtype == torch.bfloat16        # re-cast on the next matmul
    assert (x @ w).dtype == torch.float32                     # outside the region
    assert torch_tpu.fallback_ops() == {}


def test_default_dtype_and_decorator():
    assert torch.get_autocast_dtype("tpu") == torch.float16  # PyTorch's default, as on CUDA
    x = torch.randn(4, 4, device="tpu")

    @torch.autocast("tpu")
    def f(a):
        return a @ a

    assert f(x).dtype == torch.float16
    with torch.tpu.amp.autocast(dtype=torch.bfloat16):
        assert (x @ x).dtype == torch.bfloat16
    with torch.autocast("tpu", enabled=False):
        assert (x @ x).dtype == torch.float32


def test_supported_dtypes_and_unsupported_dtype_warns():
    assert torch.tpu.is_bf16_supported()
    assert torch.tpu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    x = torch.randn(4, 4, device="tpu")
    with pytest.warns(UserWarning, match="tpu Autocast only supports"):
        with torch.autocast("tpu", dtype=torch.float64):
            assert (x @ x).dtype == torch.float32  # autocast disabled


def test_binary_cross_entropy_refused_as_on_cuda():
    p = torch.rand(4, device="tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, p)
    F.binary_cross_entropy(p, p)  # fine outside the region


def test_autocast_training_step_matches_cpu_autocast():
    """Linear/ReLU/MSE get the same casts under CPU and tpu autocast, so one
    step's loss and fp32 gradients match the CPU's within bf16 rounding."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    results = {}
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(dev)
        with torch.autocast(dev, dtype=torch.bfloat16):
            out = m(x.to(dev))
            loss = F.mse_loss(out, y.to(dev))
        assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
        loss.backward()
        results[dev] = (loss.detach().cpu(), [p.grad.cpu() for p in m.parameters()])
        assert all(p.grad.dtype == torch.float32 for p in m.parameters())
    torch.testing.assert_close(results["tpu"][0], results["cpu"][0], rtol=1.6e-2, atol=1e-2)
    for gt, gc in zip(results["tpu"][1], results["cpu"][1]):
        torch.testing.assert_close(gt, gc, rtol=1.6e-2, atol=2e-2)
    assert torch_tpu.fallback_ops() == {}


# ---- the GradScaler ops against PyTorch's CPU kernels ------------------------------

def _unscale_case(dev):
    inf, nan = float("inf"), float("nan")
    grads = [torch.tensor([1.0, -2.0, 3.0]), torch.tensor([[0.5, 1e4]], dtype=torch.float16),
             torch.tensor([2.0, 4.0], dtype=torch.bfloat16)]
    return [g.to(dev) for g in grads], inf, nan


@pytest.mark.parametrize("poison", [None, "inf", "nan", "-inf"])
def test_foreach_unscale_matches_cpu(poison):
    res = {}
    for dev in ("cpu", "tpu"):
        grads, _, _ = _unscale_case(dev)
        if poison is not None:
            grads[1][0, 1] = float(poison)
        found = torch.zeros((), device=dev)
        inv = torch.full((), 1 / 1024.0, device=dev)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        res[dev] = ([g.cpu() for g in grads], found.cpu())
    for gt, gc in zip(res["tpu"][0], res["cpu"][0]):
        assert gt.dtype == gc.dtype
        torch.testing.assert_close(gt, gc, rtol=0, atol=0, equal_nan=True)
    assert res["tpu"][1].item() == res["cpu"][1].item() == (0.0 if poison is None else 1.0)
    assert torch_tpu.fallback_ops() == {}


def test_foreach_unscale_keeps_found_inf_set():
    g = [torch.ones(3, device="tpu")]
    found = torch.ones((), device="tpu")  # an earlier call found an inf
    torch._amp_foreach_non_finite_check_and_unscale_(g, found, torch.full((), 0.5, device="tpu"))
    assert found.item() == 1.0 and g[0].cpu().tolist() == [0.5] * 3


def test_foreach_unscale_bad_arguments():
    g = [torch.ones(3, device="tpu")]
    with pytest.raises(RuntimeError, match="found_inf must be a float32"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            g, torch.zeros((), dtype=torch.float64, device="tpu"), torch.ones((), device="tpu"))
    with pytest.raises(RuntimeError, match="inv_scale must be a one-element"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros((), device="tpu"),
                                                         torch.ones(2, device="tpu"))
    with pytest.raises(RuntimeError, match="floating-point"):
        torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3, dtype=torch.long, device="tpu")],
                                                         torch.zeros((), device="tpu"),
                                                         torch.ones((), device="tpu"))


# (scale, tracker, found_inf, growth, backoff, interval)
UPDATE_CASES = [
    (1024.0, 0, 0.0, 2.0, 0.5, 3),       # count up
    (1024.0, 2, 0.0, 2.0, 0.5, 3),       # reach the interval: grow, reset
    (1024.0, 2, 1.0, 2.0, 0.5, 3),       # inf found: back off, reset
    (1024.0, 1, float("nan"), 2.0, 0.5, 3),  # nan counts as found
    (3e38, 0, 0.0, 2.0, 0.5, 1),         # growth would overflow: keep the scale
    (1000.0, 0, 0.0, 1.5, 0.25, 1),      # other factors
    (1024.0, 5, 0.0, 2.0, 0.5, 3),       # tracker past the interval keeps counting, as on the CPU
]


@pytest.mark.parametrize("case", UPDATE_CASES)
def test_update_scale_matches_cpu(case):
    scale, tracker, found, growth, backoff, interval = case
    res = {}
    for dev in ("cpu", "tpu"):
        s = torch.full((), scale, device=dev)
        t = torch.full((), tracker, dtype=torch.int32, device=dev)
        r = torch._amp_update_scale_(s, t, torch.full((), found, device=dev), growth, backoff, interval)
        assert r is s
        res[dev] = (s.item(), t.item())
    assert res["tpu"] == res["cpu"]
    assert torch_tpu.fallback_ops() == {}


def test_update_scale_out_form():
    s = torch.full((), 8.0, device="tpu")
    t = torch.full((), 1, dtype=torch.int32, device="tpu")
    out = torch.empty((), device="tpu")
    torch.ops.aten._amp_update_scale.out(s, t, torch.zeros((), device="tpu"), 2.0, 0.5, 2, out=out)
    assert (out.item(), t.item(), s.item()) == (16.0, 0, 8.0)


# ---- a float16 training loop with GradScaler ---------------------------------------

def _scaler_run(device, model, data, steps, poison_steps):
    torch.manual_seed(0)
    m = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    # A large initial scale overflows float16 for the first steps; growth every
    # 4 clean steps; a gradient poisoned with inf at chosen steps.
    scaler = torch.amp.GradScaler(device, init_scale=2.0**20, growth_interval=4)
    x, y = (t.to(device) for t in data)
    log = []
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = F.mse_loss(m(x), y)
        scaler.scale(loss).backward()
        if step in poison_steps:
            next(m.parameters()).grad.view(-1)[0] = float("inf")
        before = [p.detach().clone() for p in m.parameters()]
        scaler.step(opt)
        scaler.update()
        stepped = any(bool((a != p.detach()).any()) for a, p in zip(before, m.parameters()))
        log.append((loss.item(), scaler.get_scale(), stepped))
    return log, [p.detach().cpu() for p in m.parameters()]


def test_grad_scaler_loop_matches_cpu():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    data = (torch.randn(32, 16), torch.randn(32, 4))
    steps, poison = 24, {12, 17}
    cpu_log, cpu_params = _scaler_run("cpu", model, data, steps, poison)
    tpu_log, tpu_params = _scaler_run("tpu", model, data, steps, poison)
    # The scaler's decisions are identical: same scale every step, same steps skipped.
    assert [s for _, s, _ in tpu_log] == [s for _, s, _ in cpu_log]
    assert [st for _, _, st in tpu_log] == [st for _, _, st in cpu_log]
    skipped = [i for i, (_, _, st) in enumerate(tpu_log) if not st]
    assert 12 in skipped and 17 in skipped and 0 in skipped  # overflow at 2**20, and the poisoned steps
    assert any(st for _, _, st in tpu_log)
    scales = [s for _, s, _ in tpu_log]
    assert any(b > a for a, b in zip(scales, scales[1:]))  # it grew at least once
    # float16 forward: losses and weights agree to float16 rounding.
    torch.testing.assert_close(torch.tensor([l for l, _, _ in tpu_log]), torch.tensor([l for l, _, _ in cpu_log]),
                               rtol=2e-3, atol=2e-3)
    for a, b in zip(tpu_params, cpu_params):
        torch.testing.assert_close(a, b, rtol=5e-3, atol=5e-3)
    assert torch_tpu.fallback_ops() == {}


def test_tpu_amp_grad_scaler_alias():
    s = torch.tpu.amp.GradScaler(init_scale=8.0)
    assert isinstance(s, torch.amp.GradScaler) and s.get_scale() == 8.0
    loss = torch.ones((), device="tpu", requires_grad=True)
    assert s.scale(loss).item() == 8.0 and s.scale(loss).device.type == "tpu"
