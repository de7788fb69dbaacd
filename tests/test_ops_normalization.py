"""Normalization: layer_norm (native_layer_norm + backward), batch_norm in eval
and training (native_batch_norm and its backward, the _native_batch_norm_legit
variants torch.compile uses), group_norm, instance_norm."""
import pytest
import torch
import torch.nn.functional as F

from optest import FLOAT, FLOATS, OpCase, parametrize, run_case, same_error

TOLS = dict(rtol=2e-2, atol=2e-2)


def positive(shape, dtype, i):
    return (torch.rand(shape, generator=torch.Generator().manual_seed(i)) + 0.5).to(dtype)


def f32(results):
    return (results[0],) + tuple(r.float() for r in results[1:])


def var_at(k):
    """Inputs from randn, with input k (a running_var) positive."""
    def make(shape, dtype, i):
        if i == k:
            return positive(shape, dtype, i)
        return torch.randn(shape, generator=torch.Generator().manual_seed(i)).to(dtype)
    return make


CASES = [
    OpCase("layer_norm", lambda x, w, b: F.layer_norm(x, w.shape, w, b), [[(3, 4), (4,), (4,)],
           [(2, 3, 4), (3, 4), (3, 4)]], FLOATS, grad=True, **TOLS),
    OpCase("layer_norm_weight_only_fwd", lambda x, w: F.layer_norm(x, w.shape, w), [[(2, 3, 4), (4,)]], FLOATS,
           **TOLS),
    OpCase("layer_norm_noaffine_fwd", lambda x: F.layer_norm(x, (4,)), [[(3, 4)], [(2, 3, 4)], [(0, 4)]], FLOATS,
           **TOLS),
    OpCase("native_layer_norm_stats", lambda x, w, b: f32(torch.native_layer_norm(x, [4], w, b, 1e-5)),
           [[(2, 3, 4), (4,), (4,)]], FLOATS, **TOLS),
    OpCase("batch_norm_eval", lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=False),
           [[(2, 3, 4, 4), (3,), (3,), (3,), (3,)], [(4, 3), (3,), (3,), (3,), (3,)]], FLOATS, make=var_at(2), **TOLS),
    OpCase("batch_norm_train_nostats", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
           [[(2, 3, 4, 4), (3,), (3,)], [(4, 3), (3,), (3,)], [(2, 3, 5), (3,), (3,)]], FLOATS, grad=True, **TOLS),
    # The saved statistics' dtype (and, in eval, shape) differ between PyTorch's
    # CPU and meta kernels; compare their values in f32 only.
    OpCase("native_batch_norm_train_stats", lambda x: f32(torch.native_batch_norm(x, None, None, None, None, True,
                                                                                  0.1, 1e-5)),
           [[(2, 3, 4)]], FLOATS, **TOLS),
    OpCase("batch_norm_legit_functional", lambda x, w, b, rm, rv: f32(
        torch.ops.aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.1, 1e-5)),
        [[(2, 3, 4), (3,), (3,), (3,), (3,)]], FLOATS, make=var_at(4), **TOLS),
    OpCase("batch_norm_legit_no_training", lambda x, w, b, rm, rv: torch.ops.aten._native_batch_norm_legit_no_training(
        x, w, b, rm, rv, 0.1, 1e-5)[0], [[(2, 3, 4), (3,), (3,), (3,), (3,)]], FLOATS, make=var_at(4), **TOLS),
    OpCase("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), [[(2, 4, 3, 3), (4,), (4,)], [(3, 6, 5), (6,), (6,)]],
           FLOATS, grad=True, **TOLS),
    OpCase("group_norm_one_group", lambda x, w, b: F.group_norm(x, 1, w, b), [[(2, 4, 3), (4,), (4,)]], FLOATS,
           grad=True, **TOLS),
    OpCase("group_norm_noaffine_fwd", lambda x: F.group_norm(x, 4), [[(2, 4, 3, 3)]], FLOATS, **TOLS),
]



@parametrize(CASES)
def test_normalization(case, shapes, dtype):
    run_case(case, shapes, dtype)


# Backward ops called with output_mask entries False return undefined tensors.
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_noaffine_grad(dtype):
    run_case(OpCase("ln", lambda x: F.layer_norm(x, (4,)), [[(3, 4)]], grad=True, **TOLS), [(3, 4)], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_weight_only_grad(dtype):
    run_case(OpCase("ln", lambda x, w: F.layer_norm(x, w.shape, w), [[(2, 3, 4), (4,)]], grad=True, **TOLS),
             [(2, 3, 4), (4,)], dtype)


def test_group_norm_noaffine_grad():
    run_case(OpCase("gn", lambda x: F.group_norm(x, 2), [[(2, 4, 3)]], grad=True, **TOLS), [(2, 4, 3)], torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_train_updates_running_stats(dtype):
    x = torch.randn(4, 3, 5, dtype=dtype)
    w, b = torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype)
    rm, rv = torch.zeros(3, dtype=dtype), torch.ones(3, dtype=dtype)
    drm, drv = rm.to("tpu"), rv.to("tpu")
    out = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2)
    dout = F.batch_norm(x.to("tpu"), drm, drv, w.to("tpu"), b.to("tpu"), training=True, momentum=0.2)
    torch.testing.assert_close(dout.cpu(), out, **TOLS)
    torch.testing.assert_close(drm.cpu(), rm, **TOLS)
    torch.testing.assert_close(drv.cpu(), rv, **TOLS)


def test_batchnorm_module_train_and_eval():
    m = torch.nn.BatchNorm2d(3)
    d = torch.nn.BatchNorm2d(3).to("tpu")
    x = torch.randn(2, 3, 4, 4)
    d.eval()
    m.eval()
    torch.testing.assert_close(d(x.to("tpu")).cpu(), m(x), rtol=1e-5, atol=1e-5)


def test_bad_shapes_raise():
    same_error(lambda x, w: F.layer_norm(x, (5,), w), torch.randn(3, 4), torch.randn(5))
    same_error(lambda x, w: F.group_norm(x, 3, w), torch.randn(2, 4, 3), torch.randn(4))
    same_error(lambda x, rm, rv: F.batch_norm(x, rm, rv), torch.randn(2, 3, 4), torch.randn(4), torch.rand(4))
