"""A jax_op call against the native op it replaces, same shapes, same
process: strict eager calls per second (the host's dispatch cost plus the
device's run), the same with a synchronize per call, and both inside one
torch.compile(backend="tpu") graph. Prints microseconds per call and the
ratio jax_op / native (1.0 = the same; the kernel's module is the same kind
of program as the native rule's, so differences are dispatch overhead).

    python -P benchmarks/kernels_bridge.py [--iters 50] [--rounds 7]

Needs the jax extra (bash scripts/setup.sh --jax).
"""
import argparse
import statistics
import time

import torch

import torch_tpu  # noqa: F401
import torch_tpu.compiler

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from torch_tpu._internal import pallas  # noqa: E402


def _tanh(x: jax.Array) -> jax.Array:
    return jnp.tanh(x)


def _mm(x: jax.Array, w: jax.Array) -> jax.Array:
    return x @ w


def _gelu_mul(x: jax.Array, y: jax.Array) -> jax.Array:
    return jax.nn.gelu(x, approximate=True) * y


CASES = [
    # name, jax op, native, input shapes
    ("tanh 8x8 (dispatch-bound)", pallas.jax_op("kbench::tanh", _tanh), torch.tanh, [(8, 8)]),
    ("tanh 1024x1024", pallas.jax_op("kbench::tanh2", _tanh), torch.tanh, [(1024, 1024)]),
    ("mm 512x512 @ 512x512", pallas.jax_op("kbench::mm", _mm), torch.mm, [(512, 512), (512, 512)]),
    ("gelu(x)*y 512x512 (2 native ops)", pallas.jax_op("kbench::gelu_mul", _gelu_mul),
     lambda x, y: torch.nn.functional.gelu(x, approximate="tanh") * y, [(512, 512), (512, 512)]),
]


def per_call_us(fn, args, iters, sync_each):
    fn(*args)
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
        if sync_each:
            torch.tpu.synchronize()
    torch.tpu.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=50, help="calls per round")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds; the median is printed")
    args = ap.parse_args()
    torch_tpu.compiler.register()
    print(f"{'case':36s} {'mode':18s} {'jax_op us':>10s} {'native us':>10s} {'ratio':>6s}")
    for name, op, native, shapes in CASES:
        torch.manual_seed(0)
        inputs = [torch.randn(*s, device="tpu") for s in shapes]
        torch.testing.assert_close(op(*inputs).cpu(), native(*inputs).cpu(), rtol=1e-4, atol=1e-4)
        torch._dynamo.reset()
        c_op = torch.compile(lambda *a: op(*a), backend="tpu")
        c_native = torch.compile(lambda *a: native(*a), backend="tpu")
        for mode, a, b, sync in [("eager", op, native, False), ("eager, sync each", op, native, True),
                                 ("compiled", c_op, c_native, False)]:
            # Alternating rounds, median of each: a shared, busy machine
            # shifts both sides alike.
            ra, rb = [], []
            for _ in range(args.rounds):
                ra.append(per_call_us(a, inputs, args.iters, sync))
                rb.append(per_call_us(b, inputs, args.iters, sync))
            ta, tb = statistics.median(ra), statistics.median(rb)
            print(f"{name:36s} {mode:18s} {ta:10.1f} {tb:10.1f} {ta / tb:6.2f}")


if __name__ == "__main__":
    main()
