"""SGLang ``SRTPlatform`` for device ``tpu`` (torch_tpu's PrivateUse1 backend).

Written against SGLang's out-of-tree platform interface
(``sglang/srt/platforms/interface.py`` and ``device_mixin.py``). The model path
needs no sgl_kernel, Triton or CUDA op: attention is SGLang's ``torch_native``
backend (scaled_dot_product_attention over the KV pool, gathered by the
request-to-token table), the KV pool is SGLang's MHA pool allocated on tpu and
written by index assignment, and every SGLang layer runs its
``forward_native`` (plain PyTorch ops).
"""

from typing import Optional

import torch
from sglang.srt.platforms.interface import PlatformCapabilities, PlatformEnum, SRTPlatform

from ...patches import sglang_server_args
from ...patches.sglang_server_args import ATTENTION_BACKEND
from ..device_names import COMPILE_BACKEND, DIST_BACKEND, TpuDeviceNames


class TpuSRTPlatform(TpuDeviceNames, SRTPlatform):
    _enum = PlatformEnum.OOT
    # No Triton, no graph capture, no NCCL: the conservative answers.
    capabilities = PlatformCapabilities()

    # ---- device ----

    def init_backend(self) -> None:
        import torch_tpu  # noqa: F401

    def get_device(self, device_id: int = 0) -> torch.device:
        return torch.device("tpu", device_id)

    def set_device(self, device) -> None:
        torch.tpu.set_device(device)

    def get_device_name(self, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    def get_device_uuid(self, device_id: int = 0) -> str:
        return f"tpu:{device_id}:{torch.tpu.get_device_name(device_id)}"

    def get_device_capability(self, device_id: int = 0):
        return None

    def get_device_total_memory(self, device_id: int = 0) -> int:
        return int(torch.tpu.mem_get_info(device_id)[1])

    def get_current_memory_usage(self, device: Optional[torch.device] = None) -> float:
        # total - free, so that SGLang's free = total - usage is the device's free memory.
        free, total = torch.tpu.mem_get_info(self._index(device))
        return float(total - free)

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        free, total = torch.tpu.mem_get_info(device_id)
        return int(free), int(total)

    def empty_cache(self) -> None:
        torch.tpu.empty_cache()

    def synchronize(self) -> None:
        torch.tpu.synchronize()

    def is_pin_memory_available(self, device=None) -> bool:
        return False

    @classmethod
    def seed_everything(cls, seed: Optional[int] = None) -> None:
        super().seed_everything(seed)
        if seed is not None:
            torch.tpu.manual_seed_all(seed)

    @staticmethod
    def _index(device) -> int:
        if device is None:
            return torch.tpu.current_device()
        index = torch.device(device).index
        return torch.tpu.current_device() if index is None else index

    # ---- SRT subsystems ----

    def get_default_attention_backend(self) -> str:
        return ATTENTION_BACKEND

    def get_default_speculative_draft_attention_backend(self, algorithm: str) -> str:
        return ATTENTION_BACKEND

    def get_compile_backend(self, mode: Optional[str] = None) -> str:
        return COMPILE_BACKEND

    def get_dispatch_key_name(self) -> str:
        # BaseFusedOp picks forward_tpu where an op has one (or one registered
        # with register_oot_forward(..., "tpu")), else forward_native.
        return "tpu"

    def get_torch_distributed_backend_str(self) -> str:
        return DIST_BACKEND

    def get_group_coordinator_device(self, local_rank: int) -> torch.device:
        return torch.device("tpu", local_rank)

    def apply_server_args_defaults(self, server_args) -> None:
        """Defaults that keep SGLang on its plain-PyTorch paths on tpu
        (torch_tpu/patches/sglang_server_args.py)."""
        sglang_server_args.apply(server_args)
