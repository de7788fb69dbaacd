"""Buffer donation: programs update the buffers of tensors they write in
place (torch.compile graphs that mutate inputs, strict eager in-place ops),
and the donation is never observable: views, aliases, tensors sharing a
buffer, values saved for backward and tensors the user holds stay as on the
CPU."""
import pytest
import torch

import torch_tpu


def donations():
    info = torch_tpu.cache_info()
    return info["donated"], info["donation_copies"]


def decode_step(kc, vc, pos, k, v):
    kc.index_copy_(1, pos, k)
    vc.index_copy_(1, pos, v)
    return kc.sum(-1) + vc.sum(-1)


def test_compiled_kv_cache_update_is_donated_and_matches_cpu():
    torch.manual_seed(0)
    step = torch.compile(decode_step, backend="tpu")
    kc, vc = torch.zeros(2, 16, 8, device="tpu"), torch.zeros(2, 16, 8, device="tpu")
    kc_ref, vc_ref = torch.zeros(2, 16, 8), torch.zeros(2, 16, 8)
    before = donations()
    for i in range(4):
        # the two caches have one shape: each must get its own update
        pos, k, v = torch.tensor([i]), torch.randn(2, 1, 8), torch.randn(2, 1, 8)
        out = step(kc, vc, pos.to("tpu"), k.to("tpu"), v.to("tpu"))
        ref = decode_step(kc_ref, vc_ref, pos, k, v)
        torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(kc.cpu(), kc_ref)
    torch.testing.assert_close(vc.cpu(), vc_ref)
    after = donations()
    assert after[0] - before[0] == 8  # both caches, every step
    assert after[1] == before[1]


def test_compiled_update_keeps_views_and_aliases_right():
    step = torch.compile(decode_step, backend="tpu")
    kc, vc = torch.zeros(2, 6, 3, device="tpu"), torch.zeros(2, 6, 3, device="tpu")
    flat = kc.view(-1)          # a view of the donated storage
    row = vc[1]                 # a strided alias
    k, v = torch.ones(2, 1, 3, device="tpu"), torch.full((2, 1, 3), 2.0, device="tpu")
    step(kc, vc, torch.tensor([2], device="tpu"), k, v)
    expect_k = torch.zeros(2, 6, 3)
    expect_k[:, 2] = 1
    expect_v = torch.zeros(2, 6, 3)
    expect_v[:, 2] = 2
    torch.testing.assert_close(flat.cpu(), expect_k.view(-1))
    torch.testing.assert_close(row.cpu(), expect_v[1])


def test_a_buffer_shared_with_another_tensor_is_copied_not_donated():
    step = torch.compile(decode_step, backend="tpu")
    kc, vc = torch.zeros(2, 6, 3, device="tpu"), torch.zeros(2, 6, 3, device="tpu")
    step(kc, vc, torch.tensor([0], device="tpu"), torch.ones(2, 1, 3, device="tpu"),
         torch.ones(2, 1, 3, device="tpu"))
    other = torch.empty_like(kc)
    other.copy_(kc)            # shares kc's (immutable) buffer
    held = kc.cpu()
    before = donations()
    step(kc, vc, torch.tensor([1], device="tpu"), torch.full((2, 1, 3), 5.0, device="tpu"),
         torch.ones(2, 1, 3, device="tpu"))
    after = donations()
    torch.testing.assert_close(other.cpu(), held)   # untouched
    assert kc[0, 1, 0].item() == 5.0
    assert after[1] - before[1] == 1                # kc copied; vc donated
    assert after[0] - before[0] >= 1


def test_a_view_input_is_written_through_its_storage():
    step = torch.compile(decode_step, backend="tpu")
    big_k, big_v = torch.zeros(2, 10, 3, device="tpu"), torch.zeros(2, 10, 3, device="tpu")
    ref_k, ref_v = torch.zeros(2, 10, 3), torch.zeros(2, 10, 3)
    k, v = torch.randn(2, 1, 3), torch.randn(2, 1, 3)
    step(big_k[:, 2:8], big_v[:, 2:8], torch.tensor([1], device="tpu"), k.to("tpu"), v.to("tpu"))
    decode_step(ref_k[:, 2:8], ref_v[:, 2:8], torch.tensor([1]), k, v)
    torch.testing.assert_close(big_k.cpu(), ref_k)
    torch.testing.assert_close(big_v.cpu(), ref_v)


def test_compiled_optimizer_step_updates_parameters_in_place():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ref.load_state_dict(model.state_dict())
    model.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    step = torch.compile(opt.step, backend="tpu")
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    before = donations()
    for _ in range(3):
        for m, o, xx, yy, s in ((model, opt, x.to("tpu"), y.to("tpu"), step), (ref, opt_ref, x, y, opt_ref.step)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(xx), yy).backward()
            s()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)
    for p, q in zip(opt.state.values(), opt_ref.state.values()):
        torch.testing.assert_close(p["exp_avg"].cpu(), q["exp_avg"], rtol=1e-5, atol=1e-6)
    assert donations()[0] > before[0]


def test_batch_norm_running_stats_under_compile_with_backward():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(5)
    ref = torch.nn.BatchNorm1d(5)
    bn.to("tpu")
    f = torch.compile(bn, backend="tpu")
    for _ in range(3):
        x = torch.randn(7, 5)
        xt = x.to("tpu").requires_grad_()
        xr = x.clone().requires_grad_()
        (f(xt) * torch.arange(5.0, device="tpu")).sum().backward()
        (ref(xr) * torch.arange(5.0)).sum().backward()
        torch.testing.assert_close(xt.grad.cpu(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(bn.running_mean.cpu(), ref.running_mean)
    torch.testing.assert_close(bn.running_var.cpu(), ref.running_var)


def test_the_same_tensor_passed_twice():
    def f(a, b):
        a.add_(1)
        return b * 2
    g = torch.compile(f, backend="tpu")
    x = torch.zeros(3, device="tpu")
    out = g(x, x)
    torch.testing.assert_close(out.cpu(), torch.full((3,), 2.0))
    torch.testing.assert_close(x.cpu(), torch.ones(3))


def test_eager_inplace_ops_donate_and_keep_aliases_right():
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    ref = torch.arange(12.0).reshape(3, 4)
    view = x[1]
    before = donations()
    x.mul_(2)
    ref.mul_(2)
    x.index_copy_(0, torch.tensor([2], device="tpu"), torch.ones(1, 4, device="tpu"))
    ref.index_copy_(0, torch.tensor([2]), torch.ones(1, 4))
    x[0, 1:3] = 7.0
    ref[0, 1:3] = 7.0
    assert donations()[0] - before[0] >= 3
    torch.testing.assert_close(x.cpu(), ref)
    torch.testing.assert_close(view.cpu(), ref[1])


def test_eager_inplace_on_a_shared_buffer_copies():
    x = torch.ones(4, device="tpu")
    y = torch.empty(4, device="tpu")
    y.copy_(x)            # y shares x's buffer
    before = donations()
    x.add_(1)
    assert donations()[1] - before[1] == 1
    torch.testing.assert_close(y.cpu(), torch.ones(4))
    torch.testing.assert_close(x.cpu(), torch.full((4,), 2.0))


def test_eager_inplace_keeps_values_saved_for_backward():
    a = torch.randn(5, device="tpu", requires_grad=True)
    b = a * 1.0
    c = b.exp()               # saves its result
    d = c * 1.0
    c_saved = c.detach().cpu()
    with torch.no_grad():
        b.add_(1)             # b was saved by nothing; exp's result c is separate
    d.sum().backward()
    torch.testing.assert_close(a.grad.cpu(), c_saved)
    e = a * 2
    e.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f = a.exp()
        f.mul_(2)             # exp saved its result: autograd must still see the version bump
        f.sum().backward()


def test_donation_off_gives_the_same_values(monkeypatch):
    # TORCH_TPU_DONATION is read once per process; check it in a child.
    import subprocess
    import sys
    code = ("import torch, torch_tpu\n"
            "x = torch.zeros(2, 4, 3, device='tpu')\n"
            "x.index_copy_(1, torch.tensor([1], device='tpu'), torch.ones(2, 1, 3, device='tpu'))\n"
            "print(x.sum().item(), torch_tpu.cache_info()['donated'])\n")
    out = subprocess.run([sys.executable, "-c", code], env={**__import__("os").environ, "TORCH_TPU_DONATION": "0"},
                         capture_output=True, text=True, timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6.0", "0"]


def test_fused_cluster_donates_overwritten_storages_and_keeps_shared_ones():
    torch.manual_seed(0)
    w = torch.randn(64, device="tpu")
    m = torch.zeros(64, device="tpu")
    keep = torch.empty(64, device="tpu")
    keep.copy_(w)                 # shares w's buffer: w's must be copied
    w_ref, m_ref = w.cpu(), m.cpu()
    w0 = w.cpu()
    with torch_tpu.eager_mode("fused"):
        before = donations()
        for _ in range(3):
            g = torch.sin(w)
            m.mul_(0.9).add_(g, alpha=0.1)
            w.sub_(m, alpha=0.5)
            g_ref = torch.sin(w_ref)
            m_ref.mul_(0.9).add_(g_ref, alpha=0.1)
            w_ref.sub_(m_ref, alpha=0.5)
        torch.tpu.synchronize()
        after = donations()
    torch.testing.assert_close(w.cpu(), w_ref)
    torch.testing.assert_close(m.cpu(), m_ref)
    torch.testing.assert_close(keep.cpu(), w0)
    assert after[0] > before[0]
