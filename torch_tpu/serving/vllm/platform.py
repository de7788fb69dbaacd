"""vLLM ``Platform`` for device ``tpu`` (torch_tpu's PrivateUse1 backend).

Written against vLLM's out-of-tree platform interface
(``vllm/platforms/interface.py``); it needs no vLLM C/C++ ops.
"""

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum

from ...patches import vllm_config as tpu_config
from ...patches.vllm_config import COMPILER_CLASS
from ..device_names import COMPILE_BACKEND, DIST_BACKEND, TpuDeviceNames

logger = init_logger(__name__)

ATTENTION_BACKEND_CLASS = "torch_tpu.serving.vllm.attention.TpuAttentionBackend"


class TpuPlatform(TpuDeviceNames, Platform):
    _enum = PlatformEnum.OOT
    ray_device_key: str = "TPU"
    dist_backend: str = DIST_BACKEND
    simple_compile_backend: str = COMPILE_BACKEND
    device_control_env_var: str = "TPU_VISIBLE_CHIPS"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float32, torch.float16]

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype not in (torch.bfloat16, torch.float32, torch.float16):
            raise ValueError(f"tpu serves bfloat16, float16 or float32 models, not {dtype}")

    @classmethod
    def import_kernels(cls) -> None:
        """Nothing to load: every op of the model path is an ATen op on tpu."""

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        """The Triton kernels of vLLM's step preparation, as tensor ops on tpu."""
        from vllm.triton_utils.dispatcher import register_kernels

        from .kernels import OVERRIDES

        register_kernels(OVERRIDES)

    @classmethod
    def get_compile_backend(cls) -> str:
        return COMPILER_CLASS

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.tpu.mem_get_info(device_id)[1]

    @classmethod
    def get_current_memory_usage(cls, device=None) -> float:
        return float(torch.tpu.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        if getattr(attn_selector_config, "use_mla", False):
            raise NotImplementedError("MLA attention is not supported on tpu")
        if getattr(attn_selector_config, "use_sparse", False):
            raise NotImplementedError("sparse attention is not supported on tpu")
        return ATTENTION_BACKEND_CLASS

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "vllm.distributed.device_communicators.base_device_communicator.DeviceCommunicatorBase"

    @classmethod
    def get_punica_wrapper(cls) -> str:
        return "vllm.lora.punica_wrapper.punica_cpu.PunicaWrapperCPU"

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        """Every field changed, and why: torch_tpu/patches/vllm_config.py."""
        tpu_config.apply(vllm_config)

    @classmethod
    def support_hybrid_kv_cache(cls) -> bool:
        return False

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        return True
