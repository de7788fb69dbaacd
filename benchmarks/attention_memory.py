"""SDPA on tpu, dense lowering against blockwise: peak memory and step time
(forward + backward) at 1k, 4k and 16k tokens, in one process.

    python benchmarks/attention_memory.py [--lengths 1024,4096,16384]
        [--batch 1] [--heads 4] [--dim 64] [--steps 2] [--dtype float32]
        [--block-keys 0] [--causal] [--skip-dense-above N]

Each length runs both lowerings on the same inputs (L = S = the length),
forced with torch_tpu._sdpa_path.forced: every length blockwise, then every
length dense. Printed per path:
- step: milliseconds per forward + backward (after a first step that
  compiles);
- peak tensors: torch.tpu.max_memory_allocated growth over the steps (live
  tensor buffers: q, k, v, the output, logsumexp, gradients; it leaves out
  what XLA allocates inside a program, which is where the L x S score matrix
  lives);
- peak process: growth of the process's peak resident set (VmHWM, reset
  through /proc/self/clear_refs after glibc's malloc_trim, with buffers of
  1 MiB and more mmap'ed so that freeing returns them) over the first step
  (compiling, a few MiB) and the timed ones. XLA's CPU plugin keeps
  device memory in host memory, so this is the device's real peak, program
  temporaries included.
and the dense/blockwise ratios. A dense step that fails (out of memory) is
reported as such. --skip-dense-above skips dense past that length (on a
machine too small for its L x S matrix).
"""
import argparse
import ctypes
import time

import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu._sdpa_path import forced


def _status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))


def _release_freed_memory_to_the_os():
    """glibc serves allocations of 1 MiB and more by mmap and returns them at
    free (M_MMAP_THRESHOLD fixed at 1 MiB; left alone, glibc raises it after
    frees and keeps freed buffers resident, so a later step that reuses
    them would not raise the peak)."""
    M_MMAP_THRESHOLD = -3
    ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 1 << 20)


def _reset_peak_rss():
    # Freed heap pages stay resident until trimmed, and a step reusing them
    # would not raise the peak.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure(q, k, v, causal, steps):
    """(ms per step, peak tensor bytes, peak process bytes) of forward + backward.

    The peaks cover the first step (which compiles) and the timed ones: after
    a program's first run the process may keep memory it freed and reuse it
    (seen here: a dense step at 4096 tokens that followed other lengths
    raised the peak by 14 MiB, the same step in a fresh process by 266 MiB),
    so later runs alone need not raise the peak."""
    def step():
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
        out.backward(torch.ones_like(out))
        torch.tpu.synchronize()
        return qq.grad

    torch.tpu.reset_peak_memory_stats()
    base_tensors = torch.tpu.memory_allocated()
    _reset_peak_rss()
    base_rss = _status("VmRSS")
    step()  # compiles both programs
    t = time.perf_counter()
    for _ in range(steps):
        step()
    ms = (time.perf_counter() - t) / steps * 1e3
    return ms, torch.tpu.max_memory_allocated() - base_tensors, _status("VmHWM") - base_rss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="1024,4096,16384")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--block-keys", type=int, default=0, help="blockwise key block size (0: the default)")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--skip-dense-above", type=int, default=0)
    args = p.parse_args()
    _release_freed_memory_to_the_os()
    dtype = getattr(torch, args.dtype)
    mib = 2.0 ** 20
    print(f"SDPA forward + backward on {torch_tpu.runtime_info()['platform_name']}: batch {args.batch}, "
          f"heads {args.heads}, dim {args.dim}, {args.dtype}{', causal' if args.causal else ''}, L = S")
    print(f"{'tokens':>7} {'path':>10} {'step ms':>10} {'peak tensors MiB':>17} {'peak process MiB':>17}")
    lengths = [int(x) for x in args.lengths.split(",")]
    inputs = {}
    for n in lengths:
        g = torch.Generator().manual_seed(n)
        inputs[n] = [torch.randn(args.batch, args.heads, n, args.dim, generator=g).to(dtype).to("tpu")
                     for _ in range(3)]
    # Every blockwise length first, then every dense one, each path from the
    # shortest: memory a run leaves with the process can hide a later run's
    # growth, and the dense runs leave the most.
    results = {}
    for path in ("blockwise", "dense"):
        for n in lengths:
            if path == "dense" and args.skip_dense_above and n > args.skip_dense_above:
                print(f"{n:>7} {path:>10} {'skipped':>10}")
                continue
            try:
                with forced(path, block_keys=args.block_keys if path == "blockwise" else 0):
                    results[n, path] = measure(*inputs[n], args.causal, args.steps)
            except RuntimeError as e:
                print(f"{n:>7} {path:>10} failed: {str(e).splitlines()[0][:100]}")
                continue
            ms, tensors, rss = results[n, path]
            print(f"{n:>7} {path:>10} {ms:>10.1f} {tensors / mib:>17.1f} {rss / mib:>17.1f}", flush=True)
    for n in lengths:
        if (n, "dense") in results and (n, "blockwise") in results:
            (dms, dt, dr), (bms, bt, br) = results[n, "dense"], results[n, "blockwise"]
            print(f"{n:>7} dense/blockwise: time {dms / bms:.2f}x, peak tensors {dt / max(bt, 1):.2f}x, "
                  f"peak process {dr / max(br, 1):.2f}x")

if __name__ == "__main__":
    main()
