"""Rules for nn, indexing and misc ops: index_put with a mask and broadcast
values, negative replication padding, margin losses, rrelu (evaluation),
mode, grid_sample."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, OpCase, parametrize, run_case, same_error

BF = (torch.float32, torch.bfloat16)


def g(i):
    return torch.Generator().manual_seed(i)


def randn(shape, dtype, i):
    return torch.randn(shape, generator=g(i)).to(dtype)


def margin_inputs(shape, dtype, i):
    if i == 1:  # targets
        return torch.randint(0, 5, shape, generator=g(i))
    return randn(shape, dtype, i)


def multilabel_inputs(shape, dtype, i):
    if i == 1:
        t = torch.randint(0, shape[-1], shape, generator=g(i))
        t[..., 2] = -1
        return t
    return randn(shape, dtype, i)


def grid_inputs(shape, dtype, i):
    if i == 1:
        return (torch.rand(shape, generator=g(i)) * 2.4 - 1.2).to(dtype)
    return randn(shape, dtype, i)


def grid_case(mode, padding, align):
    return lambda x, grid: F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)


def mode_inputs(shape, dtype, i):
    return torch.randint(0, 4, shape, generator=g(i)).to(dtype)


CASES = [
    OpCase("index_put_mask_rows", lambda x, v: torch.index_put(x, (x[:, 0] > 0,), v, accumulate=True),
           [[(5, 4), (4,)], [(5, 4), (1, 4)]], FLOAT, make=randn),
    OpCase("replicate_negative", lambda x: F.pad(x, (-1, 2, 1, -2), mode="replicate"), [[(2, 3, 5, 6)]], BF,
           grad=True),
    OpCase("multi_margin", lambda x, t: F.multi_margin_loss(x, t), [[(4, 5), (4,)]], FLOAT, make=margin_inputs,
           grad=True),
    OpCase("multi_margin_p2_weight", lambda x, t: F.multi_margin_loss(x, t, p=2, margin=0.7,
                                                                       weight=torch.arange(1., 6, device=x.device),
                                                                       reduction="none"),
           [[(4, 5), (4,)]], FLOAT, make=margin_inputs, grad=True),
    OpCase("multilabel_margin", lambda x, t: F.multilabel_margin_loss(x, t), [[(3, 5), (3, 5)], [(5,), (5,)]],
           FLOAT, make=multilabel_inputs, grad=True),
    OpCase("multilabel_margin_none", lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
           [[(3, 5), (3, 5)]], FLOAT, make=multilabel_inputs, grad=True),
    OpCase("mode", lambda x: torch.mode(x, 1), [[(3, 6)], [(2, 7, 3)]], (torch.float32, torch.int64),
           make=mode_inputs),
    OpCase("mode_keepdim", lambda x: torch.mode(x, -1, keepdim=True), [[(3, 6)]], FLOAT, make=mode_inputs),
    OpCase("grid_sample_bilinear", grid_case("bilinear", "zeros", False), [[(2, 3, 4, 5), (2, 3, 4, 2)]], FLOAT,
           make=grid_inputs, grad=True, rtol=1e-4, atol=1e-4),
    OpCase("grid_sample_nearest_border", grid_case("nearest", "border", True), [[(2, 3, 4, 5), (2, 3, 4, 2)]],
           FLOAT, make=grid_inputs, grad=True),
    OpCase("grid_sample_bicubic_reflect", grid_case("bicubic", "reflection", False),
           [[(1, 2, 4, 5), (1, 3, 4, 2)]], FLOAT, make=grid_inputs, grad=True, rtol=1e-4, atol=1e-4),
    OpCase("grid_sample_3d", grid_case("bilinear", "reflection", True), [[(1, 2, 3, 4, 5), (1, 2, 3, 4, 3)]],
           FLOAT, make=grid_inputs, grad=True, rtol=1e-4, atol=1e-4),
]


@parametrize(CASES)
def test_op(case, shapes, dtype):
    run_case(case, shapes, dtype)


@pytest.mark.parametrize("dtype", BF)
def test_rrelu_eval_compiled(dtype):
    # Eager rrelu_with_noise writes its noise in place and has no rule; under
    # torch.compile it is functionalized to rrelu_with_noise_functional, which
    # (in evaluation mode) and rrelu_with_noise_backward lower natively.
    import torch_tpu
    import torch_tpu.compiler
    torch_tpu.compiler.register()
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    x = randn((3, 5), dtype, 0).requires_grad_()
    xd = x.detach().to("tpu").requires_grad_()
    fn = lambda t: F.rrelu(t, 0.1, 0.4, training=False)  # noqa: E731
    y, yd = fn(x), torch.compile(fn, backend="tpu")(xd)
    g = randn((3, 5), dtype, 1)
    y.backward(g)
    yd.backward(g.to("tpu"))
    torch.testing.assert_close(yd.cpu(), y)
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
    assert torch_tpu.compile_stats()["eager_graphs"] == {}
    torch._dynamo.reset()


def test_bad_input():
    # multi_margin_loss supports p == 1 and p == 2 only.
    same_error(lambda x, t: F.multi_margin_loss(x, t, p=3), torch.randn(2, 3), torch.tensor([0, 1]))
