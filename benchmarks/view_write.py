"""Cost of an in-place write through a dtype-reinterpreting view, the layout
vLLM gives its KV caches (one int8 buffer, a float32 view of each layer's
slice), against the same write into a float32 storage of each layer's own.

    python benchmarks/view_write.py [--mib 64] [--layers 4] [--steps 10]

Prints the milliseconds per layer write of each and their ratio."""
import argparse
import time

import torch

import torch_tpu  # noqa: F401  (registers the tpu device)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=64, help="size of the whole cache")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    nbytes = args.mib << 20
    per = nbytes // args.layers
    raw = torch.zeros(nbytes, dtype=torch.int8, device="tpu")
    shared = [raw[i * per:(i + 1) * per].view(torch.float32).view(-1, 16, 4, 32) for i in range(args.layers)]
    own = [torch.zeros(per // 4, device="tpu").view(-1, 16, 4, 32) for _ in range(args.layers)]
    slots = torch.tensor([3, 17, 40], device="tpu")
    k = torch.randn(3, 4, 32, device="tpu")

    def step(caches):
        for c in caches:
            c.view(-1, 4, 32).index_copy_(0, slots, k)
        torch.tpu.synchronize()

    times = {}
    for name, caches in (("int8 buffer, float32 views", shared), ("float32 storage per layer", own)):
        for _ in range(3):
            step(caches)
        t = time.perf_counter()
        for _ in range(args.steps):
            step(caches)
        times[name] = (time.perf_counter() - t) / args.steps / args.layers * 1e3
        print(f"{name:28s} {times[name]:9.3f} ms per layer write")
    a, b = times.values()
    print(f"ratio {a / b:.1f}x")


if __name__ == "__main__":
    main()
