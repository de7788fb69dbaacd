"""vLLM ``Platform`` for device ``tpu`` (torch_tpu's PrivateUse1 backend).

Written against vLLM's out-of-tree platform interface
(``vllm/platforms/interface.py``); it needs no vLLM C/C++ ops.
"""

import os

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum

from ... import settings

logger = init_logger(__name__)

WORKER_CLASS = "torch_tpu.serving.vllm.worker.TpuWorker"
ATTENTION_BACKEND_CLASS = "torch_tpu.serving.vllm.attention.TpuAttentionBackend"
COMPILER_CLASS = "torch_tpu.serving.vllm.compiler.TpuCompiler"
# Tokens per KV cache block when the user does not choose one.
DEFAULT_BLOCK_SIZE = 16


class TpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    dispatch_key: str = "PrivateUse1"
    ray_device_key: str = "TPU"
    dist_backend: str = "tpu_dist"
    simple_compile_backend: str = "tpu"
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
        from vllm.config import CompilationMode, CUDAGraphMode

        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = WORKER_CLASS
        parallel_config.disable_custom_all_reduce = True
        if getattr(parallel_config, "enable_dbo", False):
            parallel_config.enable_dbo = False

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = DEFAULT_BLOCK_SIZE

        # Steps run one after another: the runner reads sampled tokens back
        # before it schedules the next step.
        vllm_config.scheduler_config.async_scheduling = False

        # No CUDA graphs. The model is compiled piecewise through TpuCompiler
        # (one XLA program per piece and token bucket) unless the user asks for
        # eager mode (enforce_eager, or TORCH_TPU_VLLM_COMPILE=0): then each op
        # runs as its own cached XLA program.
        compilation_config = vllm_config.compilation_config
        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        compilation_config.cudagraph_capture_sizes = []
        model_config = vllm_config.model_config
        eager = (model_config is not None and model_config.enforce_eager) or (
            not settings.get("TORCH_TPU_VLLM_COMPILE")
        )
        if eager or compilation_config.mode == CompilationMode.NONE:
            compilation_config.mode = CompilationMode.NONE
            if model_config is not None:
                model_config.enforce_eager = True
        else:
            compilation_config.mode = CompilationMode.VLLM_COMPILE
            compilation_config.backend = COMPILER_CLASS
            # One program per piece serves each token bucket (torch_tpu rounds
            # the symbolic token count up); no per-size compiles.
            if compilation_config.compile_sizes is None:
                compilation_config.compile_sizes = []
            # vLLM's fusion passes rewrite to CUDA kernels; none apply here.
            pass_config = compilation_config.pass_config
            for name in list(vars(pass_config)):
                if name.startswith(("fuse_", "enable_")) and isinstance(getattr(pass_config, name), bool):
                    setattr(pass_config, name, False)

        # Workers are started with spawn: a forked child would inherit the
        # parent's PJRT client.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        # Each worker process uses device tpu:<local rank>. XLA's CPU plugin
        # shows one device unless told how many (torchrun's LOCAL_WORLD_SIZE
        # does that under torchrun); a TPU's plugin shows its chips and
        # ignores the count.
        local_ranks = parallel_config.local_world_size * max(1, parallel_config.data_parallel_size_local)
        if local_ranks > 1 and settings.raw("TORCH_TPU_NUM_DEVICES") is None and not os.environ.get("LOCAL_WORLD_SIZE"):
            os.environ["TORCH_TPU_NUM_DEVICES"] = str(local_ranks)

    @classmethod
    def support_hybrid_kv_cache(cls) -> bool:
        return False

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        return True
