"""The CPU plugin's device memory is the process heap (csrc/runtime/host_heap.h):
freed buffers stay in it, so a program that makes a large result again and
again does not fault its pages in on every run; TORCH_TPU_HOST_HEAP=release
leaves glibc's default (such a block is mmapped and unmapped each time)."""
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc settings")

# 48 MiB blocks: over glibc's largest mmap threshold (32 MiB), so without the
# setting each one is a fresh mapping whose 12,288 pages fault on first touch.
# The block is a host tensor copied to the device and freed on this thread:
# which arena XLA's own threads allocate from is glibc's choice (host_heap.h).
WORKER = r"""
import json, resource, sys
import torch, torch_tpu
torch.ones(1, device="tpu")  # the runtime (and its heap setting) starts
def run():
    h = torch.full((12 * 2**20,), 2.0)
    d = h.to("tpu")
    torch.tpu.synchronize()
    del h, d
run(); run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(6):
    run()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"faults": faults, "heap": torch_tpu._C._runtime_info()["host_heap"]}))
"""


def run_worker(setting):
    env = dict(os.environ, TORCH_TPU_HOST_HEAP=setting, TORCH_TPU_EAGER_MODE="strict")
    out = subprocess.run([sys.executable, "-c", WORKER], cwd="/", env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_cpu_plugin_keeps_freed_memory_in_the_heap():
    torch.ones(1, device="tpu")
    if torch_tpu._C._runtime_info()["platform"] != "cpu":
        pytest.skip("only the CPU plugin's device memory is the heap")
    kept, released = run_worker("keep"), run_worker("release")
    assert kept["heap"] == "kept" and released["heap"] == "released"
    pages = 6 * 12 * 2**20 * 4 // 4096
    assert released["faults"] > pages // 2  # the default: every run faults its result in
    assert kept["faults"] < released["faults"] // 4


def test_empty_cache_hands_the_heap_back_and_tensors_survive():
    x = torch.arange(1000.0, device="tpu")
    y = torch.ones(4 * 2**20, device="tpu").mul(3)
    torch.tpu.synchronize()
    del y
    torch.tpu.empty_cache()
    torch.testing.assert_close(x.cpu(), torch.arange(1000.0))
