"""The kernel bridge (torch_tpu._internal.pallas): JAX functions and Pallas
kernels as operators on tpu tensors, compared with torch on the CPU, in
strict eager, fused eager and torch.compile(backend="tpu"); autograd,
donation, one compile per shape, interpret-mode Pallas, the
tpu_torch_pallas call forms, and bad input. Skipped without the jax extra
(`bash scripts/setup.sh --jax`)."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu
import torch_tpu.compiler

jax = pytest.importorskip("jax", reason="the jax extra is not installed: bash scripts/setup.sh --jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from torch_tpu._internal import pallas  # noqa: E402
from torch_tpu._internal.pallas import tpu_torch_pallas  # noqa: E402

torch_tpu.compiler.register()


def _sin_mul(x: jax.Array, y: jax.Array, n: int) -> jax.Array:
    return jnp.sin(x) * y + n


sin_mul = pallas.jax_op("kbridge::sin_mul", _sin_mul)


def _cos_mul(g: jax.Array, x: jax.Array) -> jax.Array:
    return g * jnp.cos(x)


def _sin(x: jax.Array) -> jax.Array:
    return jnp.sin(x)


ksin = pallas.jax_op("kbridge::sin", _sin)
kcos_mul = pallas.jax_op("kbridge::cos_mul", _cos_mul)


def _sin_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _sin_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return kcos_mul(grad, x)


ksin.register_autograd(_sin_backward, setup_context=_sin_setup)


def _add_scaled_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + 2 * y_ref[...]


def _gridded_add(x: jax.Array, y: jax.Array) -> jax.Array:
    """A Pallas kernel over a 2x2 grid of 4x8 blocks (interpret lowering)."""
    spec = pl.BlockSpec((4, 8), lambda i, j: (i, j))
    return pl.pallas_call(_add_scaled_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
                          in_specs=[spec, spec], out_specs=spec, interpret=True)(x, y)


gridded_add = pallas.jax_op("kbridge::gridded_add", _gridded_add)


def _axpy(x: jax.Array, y: jax.Array) -> jax.Array:
    return x * 3 + y


axpy_donating = pallas.jax_op("kbridge::axpy_donating", _axpy, donate_argnums=(0,))


def _split(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return x + 1, (x * 2).sum(0)


split = pallas.jax_op("kbridge::split", _split)


def eager_counters():
    return torch_tpu.cache_info()["modes"]["eager"]


def test_without_jax_the_import_is_an_import_error_naming_the_install_command():
    code = textwrap.dedent("""
        import sys
        sys.modules["jax"] = None  # as if jax were not installed
        try:
            import torch_tpu._internal.pallas
        except ImportError as e:
            print("ImportError:", e)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
                         cwd="/", env=env)
    assert "ImportError:" in out.stdout and "bash scripts/setup.sh --jax" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_jax_op_strict_eager_matches_cpu(dtype):
    x, y = torch.randn(5, 7, dtype=dtype), torch.randn(5, 7, dtype=dtype)
    out = sin_mul(x.to("tpu"), y.to("tpu"), 3)
    assert out.device.type == "tpu" and out.dtype == dtype
    torch.testing.assert_close(out.cpu(), torch.sin(x) * y + 3)


@pytest.mark.parametrize("shape", [(0, 3), (), (2, 0, 4)])
def test_jax_op_empty_and_zero_dim(shape):
    x, y = torch.randn(shape), torch.randn(shape)
    torch.testing.assert_close(sin_mul(x.to("tpu"), y.to("tpu"), 2).cpu(), torch.sin(x) * y + 2)


def test_jax_op_int64_and_broadcast_views():
    def affine(a: jax.Array) -> jax.Array:
        return a * 2 + 1

    op = pallas.jax_op("kbridge::affine", affine)
    i = torch.arange(6).reshape(2, 3)
    out = op(i.to("tpu"))
    assert out.dtype == torch.int64
    torch.testing.assert_close(out.cpu(), i * 2 + 1)
    x = torch.randn(4, 6)
    xd = x.to("tpu")
    got = sin_mul(xd[:, ::2], xd[1:2].expand(4, 6)[:, :3], 1)
    torch.testing.assert_close(got.cpu(), torch.sin(x[:, ::2]) * x[1:2].expand(4, 6)[:, :3] + 1)


def test_jax_op_compiles_once_per_shape():
    x, y = torch.randn(3, 9, device="tpu"), torch.randn(3, 9, device="tpu")
    sin_mul(x, y, 1).cpu()
    before = eager_counters()
    for _ in range(3):
        sin_mul(x, y, 1).cpu()
    after = eager_counters()
    assert after["compiles"] == before["compiles"] and after["hits"] >= before["hits"] + 3
    x4, y4 = torch.randn(4, 9, device="tpu"), torch.randn(4, 9, device="tpu")
    torch.tpu.synchronize()
    after = eager_counters()
    sin_mul(x4, y4, 1).cpu()  # a new shape
    assert eager_counters()["compiles"] == after["compiles"] + 1
    sin_mul(x, y, 2).cpu()  # a new static value is a new program too
    assert eager_counters()["compiles"] == after["compiles"] + 2


def test_jax_op_tuple_results_and_views():
    x = torch.randn(6, 4)
    base = x.to("tpu")
    a, b = split(base.t())  # a transposed view goes in as its values
    torch.testing.assert_close(a.cpu(), x.t() + 1)
    torch.testing.assert_close(b.cpu(), (x.t() * 2).sum(0))


def test_jax_op_fused_eager_is_part_of_the_cluster_program():
    torch_tpu.reset_fused_stats()
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with torch_tpu.eager_mode("fused"):
        xd, yd = x.to("tpu"), y.to("tpu")
        torch.tpu.synchronize()
        eager_before = eager_counters()["compiles"]
        out = (sin_mul(xd * 2, yd, 1) - 1).relu()
        got = out.cpu()
        stats = torch_tpu.fused_stats()
    torch.testing.assert_close(got, (torch.sin(x * 2) * y + 1 - 1).relu())
    assert eager_counters()["compiles"] == eager_before  # no program of its own
    assert stats["ops"] >= 4 and stats["clusters"] >= 1
    torch_tpu.reset_fused_stats()


def test_kernel_calls_and_donation_in_fused_eager():
    """A JaxCallable (tpu_pallas::call) and a donating jax_op inside a
    cluster: recorded, no program of their own, results as in strict eager
    (the cluster manages its buffers; the donated input keeps its value)."""
    scale = pallas.JaxCallable(name="fused_scale", jit_fn=jax.jit(lambda x: x * 5), trace_key="fused_scale")
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    torch_tpu.reset_fused_stats()
    with torch_tpu.eager_mode("fused"):
        xd, yd = x.to("tpu"), y.to("tpu")
        torch.tpu.synchronize()
        eager_before = eager_counters()["compiles"]
        a = scale(xd + 1)
        b = axpy_donating(xd * 1, yd)
        got_a, got_b = a.cpu(), b.cpu()
        stats = torch_tpu.fused_stats()
    torch.testing.assert_close(got_a, (x + 1) * 5)
    torch.testing.assert_close(got_b, x * 3 + y)
    torch.testing.assert_close(xd.cpu(), x)
    assert eager_counters()["compiles"] == eager_before
    assert stats["ops"] >= 4
    torch_tpu.reset_fused_stats()


def test_jax_op_inside_a_compiled_graph_is_one_program():
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    x, y = torch.randn(4, 8), torch.randn(4, 8)

    def f(x, y):
        return gridded_add(sin_mul(x.relu(), y, 2), y) * 2

    compiled = torch.compile(f, backend="tpu", fullgraph=True)
    got = compiled(x.to("tpu"), y.to("tpu")).cpu()
    ref = ((torch.sin(x.relu()) * y + 2) + 2 * y) * 2
    torch.testing.assert_close(got, ref)
    s = torch_tpu.compile_stats()
    assert s["graphs"] == 1 and s["compiles"] == 1 and s["eager_graphs"] == {}, s
    assert s["op_counts"].get("kbridge::sin_mul") == 1 and s["op_counts"].get("kbridge::gridded_add") == 1
    torch._dynamo.reset()


def test_jax_op_autograd_through_register_autograd():
    x = torch.randn(3, 5, dtype=torch.float64)
    xd = x.to("tpu").requires_grad_()
    (ksin(xd) * 3).sum().backward()
    xc = x.clone().requires_grad_()
    (torch.sin(xc) * 3).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_jax_op_autograd_in_a_compiled_graph():
    torch._dynamo.reset()
    x = torch.randn(8, 3)
    xd = x.to("tpu").requires_grad_()
    torch.compile(lambda t: ksin(t).pow(2).sum(), backend="tpu")(xd).backward()
    xc = x.clone().requires_grad_()
    torch.sin(xc).pow(2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    torch._dynamo.reset()


def test_donation_gives_the_buffer_to_the_result():
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    xd, yd = x.to("tpu"), y.to("tpu")
    torch.tpu.synchronize()
    before = torch_tpu.cache_info()["donated"]
    out = axpy_donating(xd, yd)
    torch.testing.assert_close(out.cpu(), x * 3 + y)
    assert torch_tpu.cache_info()["donated"] == before + 1
    # The donated tensor now holds the result its buffer became.
    torch.testing.assert_close(xd.cpu(), out.cpu())
    torch.testing.assert_close(yd.cpu(), y)


def test_donation_of_part_of_a_storage_copies_and_keeps_the_input():
    x, y = torch.randn(8, 4), torch.randn(4, 4)
    base = x.to("tpu")
    torch.tpu.synchronize()
    before = torch_tpu.cache_info()["donated"]
    out = axpy_donating(base[2:6], y.to("tpu"))  # a view of part of its storage is not donated
    torch.testing.assert_close(out.cpu(), x[2:6] * 3 + y)
    torch.testing.assert_close(base.cpu(), x)
    assert torch_tpu.cache_info()["donated"] == before


def test_gridded_pallas_kernel_with_block_specs_matches_cpu():
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    torch.testing.assert_close(gridded_add(x.to("tpu"), y.to("tpu")).cpu(), x + 2 * y)


def test_custom_kernel_decorator_runs_a_pallas_kernel():
    @pallas.custom_kernel(lambda x, y: torch.empty_like(x), interpret=True, grid=(2,),
                          in_specs=[pl.BlockSpec((4, 16), lambda i: (i, 0))] * 2,
                          out_specs=pl.BlockSpec((4, 16), lambda i: (i, 0)))
    def add_rows(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] - y_ref[...]

    x, y = torch.randn(8, 16), torch.randn(8, 16)
    torch.testing.assert_close(add_rows(x.to("tpu"), y.to("tpu")).cpu(), x - y)


def _exported(fn, *shapes, donate=()):
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    return jax.export.export(jax.jit(fn, donate_argnums=donate), platforms=["cpu"])(*args)


def test_tpu_torch_pallas_call_forms():
    e = _exported(lambda a, b: (a * b, a - b), (4, 4), (4, 4), donate=(0,))
    key = "mul_sub_4x4"
    assert not tpu_torch_pallas.lookup_custom_kernel("mul_sub", key)
    tpu_torch_pallas.register_custom_kernel("mul_sub", key, serialized_mlir_module=e.mlir_module_serialized)
    assert tpu_torch_pallas.lookup_custom_kernel("mul_sub", key)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    shapes = [torch.empty(4, 4, device="tpu"), torch.empty(4, 4, device="tpu")]
    r1 = tpu_torch_pallas.call_custom_kernel("mul_sub", key, inputs=[a.to("tpu"), b.to("tpu")],
                                             output_shapes=shapes, donate_argnums=[0])
    r2 = tpu_torch_pallas.call_custom_kernel("mul_sub", key, inputs=[a.to("tpu"), b.to("tpu")],
                                             output_shapes=shapes, input_output_aliases={0: 0})
    for r in (r1, r2):
        torch.testing.assert_close(r[0].cpu(), a * b)
        torch.testing.assert_close(r[1].cpu(), a - b)
    # inductor's pattern: the result is copied back into the donated input.
    ad = a.to("tpu")
    res = tpu_torch_pallas.call_custom_kernel("mul_sub", key, inputs=[ad, b.to("tpu")], output_shapes=shapes,
                                              donate_argnums=[0])
    ad.copy_(res[0])
    torch.testing.assert_close(ad.cpu(), a * b)


def test_jax_callable_records_what_helion_reads():
    c = pallas.JaxCallable(name="scale", jit_fn=jax.jit(lambda x: x * 4), trace_key="scale_1",
                           input_output_aliases={})
    x = torch.randn(3, 3)
    torch.testing.assert_close(c(x.to("tpu")).cpu(), x * 4)
    key = pallas._get_kernel_invocation_key(c.trace_key, (x.to("tpu"),), {}, c.static_argnums)
    shapes, tree = c.output_shapes[key]
    assert [tuple(s.shape) for s in shapes] == [(3, 3)]
    fp = c.kernel_key_to_mlir_fingerprint[key]
    assert tpu_torch_pallas.lookup_custom_kernel("scale", fp)
    out = tpu_torch_pallas.call_custom_kernel("scale", fp, inputs=[x.to("tpu")], output_shapes=shapes,
                                              donate_argnums=())
    torch.testing.assert_close(tree.unflatten(out).cpu(), x * 4)


def test_a_module_exported_for_tpu_names_both_platforms():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    f = lambda x: pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)  # noqa: E731
    e = jax.export.export(jax.jit(f), platforms=["tpu"])(jax.ShapeDtypeStruct((8, 128), jnp.float32))
    with pytest.raises(RuntimeError, match=r"platform 'tpu'.*'cpu' plugin"):
        tpu_torch_pallas.register_custom_kernel("k_tpu", "k", serialized_mlir_module=e.mlir_module_serialized)


def test_a_tpu_only_primitive_is_named():
    from jax.experimental.pallas import tpu as pltpu

    def k(x_ref, o_ref):
        pltpu.prng_seed(0)
        o_ref[...] = x_ref[...]

    def seeded(x: jax.Array) -> jax.Array:
        return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)

    op = pallas.jax_op("kbridge::seeded", seeded)
    with pytest.raises(RuntimeError, match="kbridge::seeded.*'prng_seed' is TPU-only"):
        op(torch.randn(8, 128, device="tpu"))


@pytest.mark.parametrize("built", ["inside", "before"])
def test_a_pallas_kernel_built_for_tpu_runs_through_the_interpret_lowering(built):
    # No interpret=True, TPU compiler parameters, a grid: as kernel libraries
    # write them. Built inside the traced function, or once before it (as
    # Helion builds its kernels), it runs on this plugin all the same.
    from jax.experimental.pallas import tpu as pltpu

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + 1

    def build(shape, dtype):
        spec = pl.BlockSpec((4, 128), lambda i: (i, 0))
        return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(shape, dtype), grid=(shape[0] // 4,),
                              in_specs=[spec], out_specs=spec,
                              compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))

    prebuilt = build((8, 128), jnp.float32)

    def plain(x: jax.Array) -> jax.Array:
        return (build(x.shape, x.dtype) if built == "inside" else prebuilt)(x)

    op = pallas.jax_op(f"kbridge::plain_{built}", plain)
    x = torch.randn(8, 128)
    torch.testing.assert_close(op(x.to("tpu")).cpu(), x * 2 + 1)
    e = jax.export.export(jax.jit(plain), platforms=["cpu"])
    with pytest.raises(ValueError, match="Only interpret mode"):  # JAX alone refuses it off TPU
        e(jax.ShapeDtypeStruct((8, 128), jnp.float32))


def test_bad_input():
    def unannotated(x, y: jax.Array) -> jax.Array:
        return x + y

    with pytest.raises(TypeError, match="parameter 'x' has no annotation"):
        pallas.jax_op("kbridge::bad1", unannotated)

    def no_return(x: jax.Array):
        return x

    with pytest.raises(TypeError, match="no return annotation"):
        pallas.jax_op("kbridge::bad2", no_return)
    with pytest.raises(ValueError, match="namespace::op_name"):
        pallas.jax_op("nonamespace", _sin)

    def mm(x: jax.Array, y: jax.Array) -> jax.Array:
        return x @ y

    op = pallas.jax_op("kbridge::mm", mm)
    torch.testing.assert_close(op(torch.ones(2, 3, device="tpu"), torch.ones(3, 4, device="tpu")).cpu(),
                               torch.full((2, 4), 3.0))
    with pytest.raises(RuntimeError, match="kbridge::mm: JAX could not lower"):
        op(torch.ones(2, 3, device="tpu"), torch.ones(4, 4, device="tpu"))  # shapes the kernel rejects
    with pytest.raises(NotImplementedError, match="kbridge::mm: a jax_op runs on tpu tensors"):
        op(torch.ones(2, 3), torch.ones(3, 4))
    # The process goes on: the op still works.
    assert op(torch.ones(1, 1, device="tpu"), torch.ones(1, 1, device="tpu")).item() == 1.0

    e = _exported(lambda a: a + 1, (2, 2))
    tpu_torch_pallas.register_custom_kernel("plus1", "k", serialized_mlir_module=e.mlir_module_serialized)
    out_shape = [torch.empty(2, 2)]
    with pytest.raises(ValueError, match="plus1: input 0 is torch.float32\\[3, 2\\]"):
        tpu_torch_pallas.call_custom_kernel("plus1", "k", inputs=[torch.ones(3, 2, device="tpu")],
                                            output_shapes=out_shape)
    with pytest.raises(ValueError, match="plus1: input 0 is torch.int64"):
        tpu_torch_pallas.call_custom_kernel("plus1", "k", inputs=[torch.ones(2, 2, dtype=torch.int64,
                                                                              device="tpu")],
                                            output_shapes=out_shape)
    with pytest.raises(ValueError, match="plus1: input 0 is on cpu"):
        tpu_torch_pallas.call_custom_kernel("plus1", "k", inputs=[torch.ones(2, 2)], output_shapes=out_shape)
    one = [torch.ones(2, 2, device="tpu")]
    assert tpu_torch_pallas.call_custom_kernel("plus1", "k", inputs=one, output_shapes=out_shape,
                                               device_assignment=[0])[0].cpu().eq(2).all()
    with pytest.raises(NotImplementedError, match=r"plus1: device_assignment \[0, 1\]"):
        tpu_torch_pallas.call_custom_kernel("plus1", "k", inputs=one, output_shapes=out_shape,
                                            device_assignment=[0, 1])
    with pytest.raises(KeyError, match="no kernel 'plus1' registered under key 'other'"):
        tpu_torch_pallas.call_custom_kernel("plus1", "other", inputs=[torch.ones(2, 2, device="tpu")],
                                            output_shapes=out_shape)
