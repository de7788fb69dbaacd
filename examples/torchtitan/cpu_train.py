"""TorchTitan's own trainer on the CPU with gloo: the reference for the tpu runs.

    torchrun --standalone --nproc_per_node 2 examples/torchtitan/cpu_train.py \
        --module tpu_configs --config llama3_debugmodel_sdpa ...   # TorchTitan's arguments

(`run.py --device cpu` builds this command; run it with TORCH_DEVICE_BACKEND_AUTOLOAD=0
so that torch_tpu is not loaded at all and the run is plain PyTorch.)

TorchTitan 0.3.0 has no option for the CPU: `torchtitan/tools/utils.py` sets the
module globals `device_type, device_module = get_device_info()` at import, from
`torch._utils._get_available_device_type() or "cuda"`, so with no accelerator it
picks cuda and fails ("Found no NVIDIA driver"); there is no config field,
`--comm.*` option or environment variable for the device. Every other TorchTitan
module reads those two globals (`from torchtitan.tools.utils import device_type,
device_module`) when it is imported.

What this launcher changes, and only that: it imports `torchtitan.tools.utils`
first and, before any other TorchTitan module is imported, sets
    device_type   = "cpu"
    device_module = CpuDeviceModule (below)
and makes FSDP2 reduce gradients with SUM on gloo (next paragraph); then it calls
`torchtitan.train.main()` unchanged. With device type "cpu" TorchTitan
itself then places the model and batches on `cpu:0`
(`get_local_device()`: torch.cpu.device_count() is 1), builds its DeviceMesh on
"cpu", and initializes the process group with backend
`Backend.default_device_backend_map["cpu"]`, which is "gloo"; FSDP2, SAC, the
dataloader, optimizer, LR schedule, gradient clipping, checkpoint loading and the
loss logging are TorchTitan's own code paths, as on tpu.

Gloo has no `ReduceOp.PREMUL_SUM`, which FSDP2 picks for its reduce-scatter once
TorchTitan sets `set_gradient_divide_factor(1.0)` on every FSDP module (TorchTitan
scales gradients by the global token count itself; "Cannot use ReduceOp.PREMUL_SUM
with Gloo" otherwise). The launcher wraps `FSDPModule.set_gradient_divide_factor`
so that it also calls FSDP2's public `set_force_sum_reduction_for_comms(True)`:
FSDP2 then reduce-scatters with SUM and multiplies by 1/factor afterwards, which for
TorchTitan's factor 1.0 is the same arithmetic (x * 1.0 == x exactly).

`torch.cpu.current_device()` returns the string "cpu"; TorchTitan passes it to
`barrier(device_ids=[...])`, which takes indices, so CpuDeviceModule returns 0 (the
index of `cpu:0`, TorchTitan's device here). `torch.cpu` also lacks the memory calls that TorchTitan's memory monitor makes
(`get_device_name`, `get_device_properties(d).total_memory`, `memory_stats`,
`reset_peak_memory_stats`, `empty_cache`); CpuDeviceModule supplies them from the
process: the name is the CPU model, total memory is the machine's physical memory,
the peak "active" and "reserved" bytes are the process's peak resident set
(VmHWM; `reset_peak_memory_stats` resets it through /proc/self/clear_refs), and
there are no allocation retries or OOMs to count (the CPU allocator has no cache,
so `empty_cache` has nothing to free). These only feed TorchTitan's memory log line.
"""
import os
import platform
import types

import torch


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident set
    except OSError:
        pass


def _memory_stats(device=None) -> dict:
    peak = _peak_rss_bytes()
    return {"active_bytes.all.peak": peak, "reserved_bytes.all.peak": peak,
            "num_alloc_retries": 0, "num_ooms": 0}


CpuDeviceModule = types.SimpleNamespace(
    set_device=torch.cpu.set_device,
    current_device=lambda: 0,  # an index, as TorchTitan passes it to barrier(device_ids=...)
    device_count=torch.cpu.device_count,
    synchronize=torch.cpu.synchronize,
    is_available=torch.cpu.is_available,
    get_device_name=lambda device=None: _cpu_name(),
    get_device_properties=lambda device=None: types.SimpleNamespace(
        name=_cpu_name(), total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
    memory_stats=_memory_stats,
    reset_peak_memory_stats=lambda device=None: _reset_peak_rss(),
    empty_cache=lambda: None,
)


def _sum_reduction_for_gloo() -> None:
    from torch.distributed.fsdp import FSDPModule

    set_factor = FSDPModule.set_gradient_divide_factor

    def set_gradient_divide_factor(self, factor: float) -> None:
        set_factor(self, factor)
        self.set_force_sum_reduction_for_comms(True)  # gloo: SUM, then * (1 / factor)

    FSDPModule.set_gradient_divide_factor = set_gradient_divide_factor


def point_torchtitan_at_cpu() -> None:
    """Sets TorchTitan's device globals; must run before other TorchTitan imports."""
    import sys
    import torchtitan.tools.utils as titan_utils

    early = [m for m in sys.modules if m.startswith("torchtitan.") and m not in
             ("torchtitan.tools", "torchtitan.tools.utils", "torchtitan.tools.logging")
             and not m.startswith("torchtitan.observability")]
    if early:
        raise RuntimeError(f"TorchTitan modules imported before the device was set: {early}")
    titan_utils.device_type = "cpu"
    titan_utils.device_module = CpuDeviceModule
    _sum_reduction_for_gloo()


if __name__ == "__main__":
    point_torchtitan_at_cpu()
    from torchtitan.train import main

    main()
