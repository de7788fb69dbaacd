"""Eager decompositions (torch_tpu/_eager_decompositions.py): an op without a
rule runs as PyTorch's decomposition on tpu when every op it expands to is
native, decided once per signature; otherwise it falls back to the CPU,
visibly and with the reason. Test ops live in their own namespace so that
later rules for real ops cannot change what these tests see."""
import os
import subprocess
import sys

import pytest
import torch
import torch_tpu
from torch._decomp import decomposition_table

from torch_tpu import _eager_decompositions as eager_decompositions

_lib = torch.library.Library("tt_decomp_test", "DEF")
_lib.define("double_it(Tensor x) -> Tensor")
_lib.define("double_it.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
_lib.define("double_it_(Tensor(a!) x) -> Tensor(a!)")
_lib.define("needs_cpu(Tensor x) -> Tensor")
_lib.define("only_cpu(Tensor x) -> Tensor")
_lib.define("alias_of(Tensor(a) x) -> Tensor(a)")
_lib.define("checked(Tensor x) -> Tensor")


def _out_impl(x, *, out):
    out.resize_(x.shape)
    return out.copy_(x * 2)


for _name, _cpu, _meta in [
    ("double_it", lambda x: x * 2, torch.empty_like),
    ("double_it.out", _out_impl, lambda x, *, out: out.resize_(x.shape)),
    ("double_it_", lambda x: x.mul_(2), lambda x: x),
    ("needs_cpu", lambda x: x + 1, torch.empty_like),
    ("only_cpu", lambda x: x - 1, torch.empty_like),
    ("alias_of", lambda x: x.view(x.shape), lambda x: x.view(x.shape)),
]:
    _lib.impl(_name, _cpu, "CPU")
    _lib.impl(_name, _meta, "Meta")


def _checked_meta(x):
    if x.dim() != 2:
        raise ValueError(f"checked expects a matrix, got {x.dim()} dims")
    return torch.empty_like(x)


_lib.impl("checked", lambda x: _checked_meta(x).copy_(x + 3), "CPU")
_lib.impl("checked", _checked_meta, "Meta")

ops = torch.ops.tt_decomp_test
_DECOMPOSITIONS = {
    ops.double_it.default: lambda x: x * 2,
    ops.needs_cpu.default: lambda x: ops.only_cpu(x) + 2,
    ops.alias_of.default: lambda x: x.clone(),
    ops.checked.default: lambda x: x + 3,
}


@pytest.fixture(autouse=True)
def _test_decompositions():
    decomposition_table.update(_DECOMPOSITIONS)
    eager_decompositions.reset_decomposed_ops()
    yield
    for op in _DECOMPOSITIONS:
        decomposition_table.pop(op, None)


def test_native_decomposition_runs_on_tpu_once_decided():
    x = torch.randn(3, 4)
    for _ in range(3):
        y = ops.double_it(x.to("tpu"))
        assert y.device.type == "tpu"
        torch.testing.assert_close(y.cpu(), x * 2)
    assert torch_tpu.decomposed_ops()["tt_decomp_test::double_it"] == 3
    assert torch_tpu.fallback_ops() == {}
    decisions = {k: v for k, v in eager_decompositions.decomposition_decisions().items()
                 if k[0] == "tt_decomp_test::double_it"}
    assert list(decisions.values()) == [("native", None)]


def test_a_new_signature_is_decided_again():
    ops.double_it(torch.randn(3, device="tpu"))
    ops.double_it(torch.randn(3, device="tpu"))
    ops.double_it(torch.randn(2, 5, device="tpu").t())
    keys = [k for k in eager_decompositions.decomposition_decisions() if k[0] == "tt_decomp_test::double_it"]
    assert len(keys) == 2


def test_inplace_and_out_forms_use_the_functional_decomposition():
    x = torch.randn(3, 4)
    t = x.to("tpu")
    assert ops.double_it_(t) is t
    torch.testing.assert_close(t.cpu(), x * 2)
    out = torch.empty(0, device="tpu")
    ops.double_it.out(x.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), x * 2)
    counts = torch_tpu.decomposed_ops()
    assert counts["tt_decomp_test::double_it_"] == 1 and counts["tt_decomp_test::double_it.out"] == 1


def test_decomposition_needing_a_cpu_op_falls_back_with_the_reason(allow_fallback):
    x = torch.randn(5)
    y = ops.needs_cpu(x.to("tpu"))
    torch.testing.assert_close(y.cpu(), x + 1)  # the CPU kernel, not the decomposition
    assert torch_tpu.fallback_ops()["tt_decomp_test::needs_cpu"] == 1
    assert "tt_decomp_test::needs_cpu" not in torch_tpu.decomposed_ops()
    (state, reason), = [v for k, v in eager_decompositions.decomposition_decisions().items()
                        if k[0] == "tt_decomp_test::needs_cpu"]
    assert state == "fallback" and "tt_decomp_test::only_cpu" in reason, reason


def test_fallback_error_mode_names_the_missing_op():
    with pytest.raises(NotImplementedError, match="only_cpu"):
        ops.needs_cpu(torch.randn(5, device="tpu"))


def test_an_op_returning_a_view_is_never_decomposed():
    with pytest.raises(NotImplementedError, match="view"):
        ops.alias_of(torch.randn(5, device="tpu"))


def test_bad_arguments_raise_pytorch_own_error():
    with pytest.raises(ValueError, match="expects a matrix"):
        ops.checked(torch.randn(5, device="tpu"))
    y = ops.checked(torch.ones(2, 2, device="tpu"))
    torch.testing.assert_close(y.cpu(), torch.full((2, 2), 4.0))


def test_ops_with_a_rule_never_reach_the_decomposition_handler():
    calls = []

    def counting(name, args):
        calls.append(name)
        return eager_decompositions.handle(name, args)

    torch_tpu._C._set_eager_decomposition_handler(counting)
    try:
        x = torch.randn(4, 4, device="tpu")
        ((x + 1) * x).relu().sum().item()
        x.add_(1)
        torch.mm(x, x, out=torch.empty(4, 4, device="tpu"))
        assert calls == []
        ops.double_it(x)
        assert calls == ["tt_decomp_test::double_it"]
    finally:
        eager_decompositions.install()


def test_a_declined_rule_tries_the_decomposition():
    # logspace's rule computes in floating point only; PyTorch's
    # decomposition serves integer results.
    y = torch.logspace(0, 3, 4, dtype=torch.int64, device="tpu")
    torch.testing.assert_close(y.cpu(), torch.logspace(0, 3, 4, dtype=torch.int64))
    assert torch_tpu.decomposed_ops().get("aten::logspace", 0) >= 1


def _identity_backward(ctx, grad):
    return ops.double_it(grad)  # decomposed on tpu


_lib.define("identity_doubling_grad(Tensor x) -> Tensor")
_lib.impl("identity_doubling_grad", lambda x: x.clone(), "CPU")
_lib.impl("identity_doubling_grad", lambda x: x.clone(), "PrivateUse1")
_lib.impl("identity_doubling_grad", torch.empty_like, "Meta")
torch.library.register_autograd("tt_decomp_test::identity_doubling_grad", _identity_backward)


def test_autograd_through_a_decomposed_backward():
    x = torch.randn(7, 3)
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    g = torch.randn(7, 3)
    torch_tpu.reset_decomposed_ops()
    ops.identity_doubling_grad(xc).backward(g)
    ops.identity_doubling_grad(xt).backward(g.to("tpu"))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    torch.testing.assert_close(xc.grad, g * 2)
    assert "tt_decomp_test::double_it" in torch_tpu.decomposed_ops()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_decomposed_ops_in_both_eager_modes(mode):
    x = torch.randn(7, 3)
    g = torch.randn(3, 3, 3)
    xt = x.to("tpu").requires_grad_()
    with torch_tpu.eager_mode(mode):
        y = ops.double_it(xt.detach()) + 1
        idx = torch.triu_indices(4, 4, 1, device="tpu")
        xt.unfold(0, 3, 2).backward(g.to("tpu"))
    xc = x.clone().requires_grad_()
    xc.unfold(0, 3, 2).backward(g)
    torch.testing.assert_close(y.cpu(), x * 2 + 1)
    torch.testing.assert_close(idx.cpu(), torch.triu_indices(4, 4, 1))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    assert torch_tpu.fallback_ops() == {}


def test_switched_off_by_the_environment(tmp_path):
    code = ("import torch, torch_tpu; torch_tpu.set_fallback_mode('silent');"
            "torch.tril_indices(3, 3, device='tpu');"
            "print(sorted(torch_tpu.fallback_ops()), sorted(torch_tpu.decomposed_ops()))")
    env = dict(os.environ, TORCH_TPU_EAGER_DECOMPOSITIONS="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['aten::tril_indices'] []"
