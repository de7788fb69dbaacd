"""Quickstart: train a small MLP on the `tpu` device.

The only change from a CUDA script is the device string. On a machine without
a TPU the device is XLA's CPU PJRT plugin, so this runs anywhere.
(benchmarks/first_step.py times setup() and train() from a fresh process.)
"""
import time

import torch
import torch.nn as nn

import torch_tpu


def setup(device):
    """The data, the model and its optimizer, on `device`."""
    torch.manual_seed(0)
    # A noisy 2-D regression problem: y = sin(3 x0) + x1^2.
    x = torch.rand(512, 2) * 2 - 1
    y = (torch.sin(3 * x[:, :1]) + x[:, 1:] ** 2) + 0.01 * torch.randn(512, 1)
    x, y = x.to(device), y.to(device)

    model = nn.Sequential(nn.Linear(2, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return x, y, model, opt


def train(x, y, model, opt, report):
    """201 steps; every 25th step's loss (read back from the device) goes to report(step, loss)."""
    for step in range(201):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step % 25 == 0:
            report(step, loss.item())


def main():
    device = torch.device("tpu")
    x, y, model, opt = setup(device)

    info = torch_tpu.runtime_info()
    print(f"device: {device} -> {torch.tpu.get_device_name()}")
    print(f"plugin: {info['plugin_path']} (PJRT API {info['pjrt_api_version']}; {info['reason']})")

    start = time.perf_counter()
    train(x, y, model, opt, lambda step, loss: print(f"step {step:4d}  loss {loss:.5f}"))
    elapsed = time.perf_counter() - start

    stats = torch_tpu.cache_info()
    print(f"trained 201 steps in {elapsed:.1f}s; programs compiled: {stats['compiles']} "
          f"({stats['compile_seconds']:.1f}s), loaded from the compile cache: {stats['disk_hits']}, "
          f"cache hits: {stats['hits']}")
    fallbacks = torch_tpu.fallback_ops()
    print("CPU fallbacks:", fallbacks if fallbacks else "none")


if __name__ == "__main__":
    main()
