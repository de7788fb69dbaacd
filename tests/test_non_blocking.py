"""non_blocking=True copies keep PyTorch's semantics: the source may be reused
at once, the values arrive intact, and device memory is released.

On the CPU plugin, non_blocking uploads take the synchronous path (the plugin
copies during the call anyway); the asynchronous path is run here by forcing
it with TORCH_TPU_ASYNC_UPLOADS=1 in a subprocess."""
import os
import subprocess
import sys
import textwrap

import torch
import torch_tpu  # noqa: F401

SCRIPT = textwrap.dedent(
    """
    import torch, torch_tpu
    dev = torch.device("tpu")

    # The source is overwritten right after the copy returns: the device
    # tensor still holds the old values (same dtype, contiguous: the
    # zero-conversion path, which must read a private copy).
    x = torch.arange(1 << 20, dtype=torch.float32)
    want = x.clone()
    y = x.to(dev, non_blocking=True)
    x.fill_(-1.0)
    assert torch.equal(y.cpu(), want), "the upload saw a later write to its source"

    # Converting, broadcasting and strided sources.
    s = torch.randn(64, 48, dtype=torch.float64)
    assert torch.equal(s.t().to(dev, dtype=torch.float32, non_blocking=True).cpu(), s.t().float())
    b = torch.empty(4, 5, device=dev)
    b.copy_(torch.arange(5.0), non_blocking=True)
    assert torch.equal(b.cpu(), torch.arange(5.0).expand(4, 5))

    # Into a view of a tpu tensor (a program writes the view).
    z = torch.zeros(6, 6, device=dev)
    z[1:3, 2:5].copy_(torch.ones(2, 3), non_blocking=True)
    ref = torch.zeros(6, 6)
    ref[1:3, 2:5] = 1
    assert torch.equal(z.cpu(), ref)

    # Many uploads in flight, then compute on them; memory comes back.
    base = torch.tpu.memory_allocated()
    srcs = [torch.full((1000,), float(i)) for i in range(50)]
    outs = [t.to(dev, non_blocking=True) for t in srcs]
    for t in srcs:
        t.zero_()
    total = sum(o.sum() for o in outs)
    assert total.item() == 1000 * sum(range(50)), total.item()
    del outs, total
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == base, (torch.tpu.memory_allocated(), base)

    # tpu -> cpu with non_blocking: readable at once.
    w = torch.randn(333)
    back = w.to(dev).to("cpu", non_blocking=True)
    assert torch.equal(back, w)
    print("OK")
    """
)


def run(async_uploads):
    env = dict(os.environ, TORCH_TPU_ASYNC_UPLOADS=async_uploads)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=240,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_asynchronous_uploads():
    run("1")


def test_synchronous_uploads():
    run("0")


def test_non_blocking_in_process():
    x = torch.randn(7, 9)
    want = x.clone()
    y = x.to("tpu", non_blocking=True)
    x.add_(100)
    assert torch.equal(y.cpu(), want)
    assert torch.equal(y.to("cpu", non_blocking=True), want)
