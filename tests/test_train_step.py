"""torch_tpu.TrainStep: forward, backward and the optimizer update as one
compiled program, equal to the eager loop on the CPU."""
import pytest
import torch

import torch_tpu


def _models():
    torch.manual_seed(0)
    make = lambda: torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 3))
    a = make()
    b = make()
    b.load_state_dict(a.state_dict())
    return a.to("tpu"), b


def _loss(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def _both_steps(step, ref, opt_ref, loss_fn, *batch):
    """One TrainStep on tpu and the eager loop's step on the CPU; same loss."""
    loss = step(*(b.to("tpu") for b in batch))
    opt_ref.zero_grad()
    loss_ref = loss_fn(ref, *batch)
    loss_ref.backward()
    opt_ref.step()
    torch.testing.assert_close(loss.cpu(), loss_ref.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True),
], ids=["adamw", "sgd_nesterov", "adam_amsgrad"])
def test_matches_the_eager_cpu_loop_and_is_one_program_per_step(make_opt):
    model, ref = _models()
    opt, opt_ref = make_opt(model.parameters()), make_opt(ref.parameters())
    step = torch_tpu.TrainStep(model, _loss, opt)
    torch.manual_seed(1)
    batches = [(torch.randn(8, 12), torch.randint(0, 3, (8,))) for _ in range(5)]
    for i, (x, y) in enumerate(batches):
        if i == 3:
            before = torch_tpu.cache_info()
        _both_steps(step, ref, opt_ref, _loss, x, y)
    after = torch_tpu.cache_info()
    # the last two steps: one program each, no compile, state updated in place
    assert after["modes"]["graph"]["hits"] - before["modes"]["graph"]["hits"] == 2
    assert after["compiles"] == before["compiles"]
    assert after["donated"] > before["donated"]
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
        if not isinstance(opt, torch.optim.SGD):
            # (SGD's foreach form, the default on a device, adds the momentum
            # into .grad in place, as on CUDA; the CPU's per-tensor form does not.)
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)
    for s, r in zip(opt.state.values(), opt_ref.state.values()):
        for k in r:
            torch.testing.assert_close(s[k].cpu(), r[k], rtol=1e-4, atol=1e-6)


def test_batch_norm_buffers_and_dropout_free_model_train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())
    model.to("tpu")
    mse = lambda m, x, y: torch.nn.functional.mse_loss(m(x), y)
    step = torch_tpu.TrainStep(model, mse, torch.optim.SGD(model.parameters(), lr=0.05))
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(3):
        x, y = torch.randn(10, 6), torch.randn(10, 1)
        _both_steps(step, ref, opt_ref, mse, x, y)
    torch.testing.assert_close(model[1].running_mean.cpu(), ref[1].running_mean, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)


def test_bad_arguments_raise():
    model, _ = _models()
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        torch_tpu.TrainStep(model, _loss, object())
    other = torch.nn.Linear(2, 2).to("tpu")
    with pytest.raises(ValueError, match="not in the optimizer"):
        torch_tpu.TrainStep(model, _loss, torch.optim.SGD(other.parameters(), lr=0.1))
    step = torch_tpu.TrainStep(model, _loss, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="with the batch"):
        step()
