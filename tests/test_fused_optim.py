"""torch.optim's fused steps on tpu (Adam, AdamW, SGD with fused=True): several
steps of a small model equal the CPU's, with every option; the raw ops with
grad_scale / found_inf equal PyTorch's CPU fused kernels; an lr schedule does
not recompile; nothing falls back to the CPU (conftest makes that an error)."""
import copy

import pytest
import torch
import torch.nn as nn

import torch_tpu
import torch_tpu.compiler


def model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def train(m, opt, device, steps=4, scheduler=None):
    dtype = next(m.parameters()).dtype
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1)).to(device, dtype)
    for _ in range(steps):
        opt.zero_grad()
        m(x).float().pow(2).mean().backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return [p.detach().cpu().float() for p in m.parameters()]


def state_tensors(opt):
    return [v.detach().cpu().float() for s in opt.state.values() for k, v in sorted(s.items())
            if isinstance(v, torch.Tensor)]


def compare(opt_cls, options, dtype=torch.float32, steps=4, tol=None):
    cpu = model().to(dtype)
    dev = copy.deepcopy(cpu).to("tpu")
    cpu_options = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in options.items()}
    opt_c = opt_cls(cpu.parameters(), foreach=False, **cpu_options)
    opt_d = opt_cls(dev.parameters(), fused=True, **options)
    expected = train(cpu, opt_c, "cpu", steps)
    actual = train(dev, opt_d, "tpu", steps)
    tol = tol or (dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2))
    for a, e in zip(actual + state_tensors(opt_d), expected + state_tensors(opt_c)):
        torch.testing.assert_close(a, e, **tol)
    assert torch_tpu.fallback_ops() == {}


ADAM_OPTIONS = {
    "default": dict(lr=1e-2),
    "amsgrad_weight_decay": dict(lr=1e-2, weight_decay=0.1, amsgrad=True),
    "maximize_betas": dict(lr=5e-3, betas=(0.8, 0.95), eps=1e-6, maximize=True, weight_decay=0.05),
    "tensor_lr_cpu": dict(lr=torch.tensor(1e-2)),
    "tensor_lr_tpu": dict(lr=torch.tensor(1e-2, device="tpu"), amsgrad=True),
}


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW], ids=["adam", "adamw"])
@pytest.mark.parametrize("name", ADAM_OPTIONS)
def test_adam_matches_cpu(opt_cls, name):
    compare(opt_cls, ADAM_OPTIONS[name])


def test_adamw_bfloat16_matches_cpu():
    compare(torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1), dtype=torch.bfloat16)


@pytest.mark.parametrize("options", [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9, weight_decay=0.01),
    dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True),
    dict(lr=0.1, momentum=0.9, dampening=0.3),
], ids=["plain", "momentum_decay", "nesterov_maximize", "dampening"])
def test_sgd_matches_cpu(options):
    compare(torch.optim.SGD, options)


def test_lr_schedule_does_not_recompile():
    dev = model().to("tpu")
    opt = torch.optim.AdamW(dev.parameters(), lr=1e-2, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (step + 1))
    train(dev, opt, "tpu", steps=2, scheduler=sched)
    before = torch_tpu.cache_info()["compiles"]
    train(dev, opt, "tpu", steps=3, scheduler=sched)
    assert torch_tpu.cache_info()["compiles"] == before


def raw_lists(device, n=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(3, 4), (5,)][:n]
    params, grads, avgs, sqs, maxs = ([torch.randn(s, generator=g).to(device) for s in shapes] for _ in range(5))
    sqs = [s.abs() for s in sqs]
    maxs = [m.abs() for m in maxs]
    steps = [torch.tensor(3.0, device=device) for _ in shapes]
    return params, grads, avgs, sqs, maxs, steps


@pytest.mark.parametrize("found", [None, 0.0, 1.0], ids=["no_found_inf", "finite", "found_inf"])
@pytest.mark.parametrize("op", [torch._fused_adam_, torch._fused_adamw_], ids=["adam", "adamw"])
def test_raw_op_with_grad_scale_matches_cpu_kernel(op, found):
    results = {}
    for device in ("cpu", "tpu"):
        lists = raw_lists(device)
        extra = dict(grad_scale=torch.tensor(4.0, device=device))
        if found is not None:
            extra["found_inf"] = torch.tensor(found, device=device)
        op(*lists, lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=True, maximize=False,
           **extra)
        results[device] = [t.cpu() for lst in lists for t in lst]
    for a, e in zip(results["tpu"], results["cpu"]):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)


def test_raw_sgd_with_grad_scale_matches_cpu_kernel():
    results = {}
    for device in ("cpu", "tpu"):
        params, grads, bufs = raw_lists(device)[:3]
        torch._fused_sgd_(params, grads, bufs, weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=False,
                          grad_scale=torch.tensor(2.0, device=device), found_inf=torch.tensor(0.0, device=device))
        results[device] = [t.cpu() for lst in (params, grads, bufs) for t in lst]
    for a, e in zip(results["tpu"], results["cpu"]):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)


def test_grad_scaler_with_fused_adam_matches_cpu():
    """GradScaler hands grad_scale and found_inf to the fused step."""
    def run(device):
        m = model().to(device)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2, fused=True)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10)
        x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1)).to(device)
        for i in range(3):
            opt.zero_grad()
            loss = m(x).pow(2).mean() * (float("inf") if i == 1 else 1.0)  # step 1 is skipped
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return [p.detach().cpu() for p in m.parameters()] + [scaler.get_scale() * torch.ones(1)]

    for a, e in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)


def test_bad_lists_raise():
    params, grads, avgs, sqs, maxs, steps = raw_lists("tpu")
    with pytest.raises(RuntimeError):
        torch._fused_adam_(params, grads[:1], avgs, sqs, maxs, steps, lr=1e-2, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)


@pytest.mark.parametrize("mode", ["fused_eager", "compile"])
def test_fused_adamw_in_fused_eager_and_compiled_step(mode):
    cpu = model()
    dev = copy.deepcopy(cpu).to("tpu")
    expected = train(cpu, torch.optim.AdamW(cpu.parameters(), lr=1e-2, amsgrad=True, foreach=False), "cpu", 3)
    opt = torch.optim.AdamW(dev.parameters(), lr=1e-2, amsgrad=True, fused=True)
    if mode == "fused_eager":
        with torch_tpu.eager_mode("fused"):
            actual = train(dev, opt, "tpu", 3)
    else:
        torch_tpu.compiler.register()
        torch._dynamo.reset()
        torch_tpu.reset_compile_stats()
        x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1)).to("tpu")

        @torch.compile(backend="tpu")
        def step():
            opt.zero_grad()
            dev(x).float().pow(2).mean().backward()
            opt.step()

        for _ in range(3):
            step()
        actual = [p.detach().cpu() for p in dev.parameters()]
        assert torch_tpu.compile_stats()["eager_graphs"] == {}
        torch._dynamo.reset()
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)


def test_out_form_matches_cpu():
    """_fused_adamw.out: `out` receives the parameters, the other lists are updated in place."""
    results = {}
    for device in ("cpu", "tpu"):
        lists = raw_lists(device)
        out = [torch.empty_like(p) for p in lists[0]]
        before = [p.clone() for p in lists[0]]
        torch.ops.aten._fused_adamw.out(*lists, lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8,
                                        amsgrad=True, maximize=False, out=out)
        for p, b in zip(lists[0], before):
            torch.testing.assert_close(p.cpu(), b.cpu(), rtol=0, atol=0)
        results[device] = [t.cpu() for lst in (out,) + lists[1:] for t in lst]
    for a, e in zip(results["tpu"], results["cpu"]):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)
