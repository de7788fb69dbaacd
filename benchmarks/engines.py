"""The engines that benchmarks/runner.py can time, one class each. An engine
sets up its compile caches (before its framework is imported), imports its
framework, builds a workload on its device, waits for a step's results, and
reports its peak memory. An engine that cannot run here raises Missing with the
reason; the harness reports it as missing, never drops it.

This module is imported in two interpreters: the project's venv (torch 2.13,
torch_tpu, jax) and the PyTorch/XLA venv (its own torch). It imports no
framework at module level."""
import os


class Missing(Exception):
    """The engine is not available here (not installed, API not written yet)."""


def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class RssPeak:
    """Peak resident-set growth from now on: resets the kernel's high-water mark
    (write 5 to /proc/self/clear_refs) and later reads VmHWM minus the RSS at
    the start. Counts every host allocation of the process (framework caches,
    compiled code, arrays), not only tensors."""

    def __init__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:  # no permission: the peak then includes the import phase
            pass
        self.base = _rss_kib("VmRSS")

    def bytes(self):
        return max(0, _rss_kib("VmHWM") - self.base) * 1024


class TorchEngine:
    """PyTorch eager on the CPU."""
    name, device = "torch_eager", "cpu"
    memory_kind = "rss_peak_delta"

    def prepare(self, cache_dir):
        # torch_tpu must not autoload into a CPU-only engine (import time, memory).
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

    def load(self):
        import torch
        self.torch = torch
        if self.device == "cpu":
            # XLA's CPU code (JAX, torch_tpu's CPU plugin, PyTorch/XLA) flushes
            # denormals to zero; PyTorch's CPU kernels do not by default, and a
            # training step whose gradients turn denormal runs ~10x slower.
            torch.set_flush_denormal(True)
        from workloads import torch as torch_workloads
        self.workloads = torch_workloads

    def info(self):
        return {"torch": self.torch.__version__, "threads": self.torch.get_num_threads(),
                "flush_denormal": self.device == "cpu"}

    def start_memory(self):
        self.rss = RssPeak()

    def build(self, workload):
        w = self.workloads.build(workload, self.device)
        self.compile(w)
        return w

    def compile(self, w):
        pass

    def sync(self, out):
        pass

    def check(self, w, out):
        return float(w.check(out).item())

    def memory(self):
        return self.rss.bytes(), {"rss_peak_delta": self.rss.bytes()}


class InductorEngine(TorchEngine):
    """torch.compile with inductor, on the CPU. The whole step function is
    compiled: Dynamo breaks the graph at backward() (AOTAutograd compiles the
    backward of the forward graph) and compiles the optimizer step."""
    name = "torch_inductor"

    def prepare(self, cache_dir):
        super().prepare(cache_dir)
        if cache_dir:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "inductor")

    def compile(self, w):
        w.engine_compile(lambda fn: self.torch.compile(fn, backend="inductor"))


class TpuEngine(TorchEngine):
    """torch_tpu op-by-op (strict) eager, whatever the library's default."""
    name, device = "tpu_eager", "tpu"
    memory_kind = "torch.tpu.max_memory_allocated"

    def prepare(self, cache_dir):
        if cache_dir:
            os.environ["TORCH_TPU_CACHE_DIR"] = os.path.join(cache_dir, "tpu")

    def load(self):
        super().load()
        try:
            import torch_tpu
        except ImportError as e:
            raise Missing(f"torch_tpu does not import: {e}") from e
        self.torch_tpu = torch_tpu
        if hasattr(torch_tpu, "set_eager_mode"):
            torch_tpu.set_eager_mode("strict")  # the engines below choose their own mode from here
        self.set_mode()

    def set_mode(self):
        pass

    def info(self):
        return {**super().info(), "device_name": self.torch.tpu.get_device_name()}

    def start_memory(self):
        super().start_memory()
        self.torch.tpu.reset_peak_memory_stats()

    def sync(self, out):
        self.torch.tpu.synchronize()

    def memory(self):
        peak = self.torch.tpu.max_memory_allocated()
        extra = {"rss_peak_delta": self.rss.bytes(), "fallback_ops": dict(self.torch_tpu.fallback_ops())}
        if hasattr(self.torch_tpu, "cache_info"):
            extra["program_cache"] = str(self.torch_tpu.cache_info())
        return peak, extra


class TpuFusedEngine(TpuEngine):
    """torch_tpu fused eager: ops gathered into clusters compiled as one program."""
    name = "tpu_fused"

    def set_mode(self):
        if not hasattr(self.torch_tpu, "set_eager_mode"):
            raise Missing("torch_tpu.set_eager_mode does not exist in this build (fused eager not written yet)")
        self.torch_tpu.set_eager_mode("fused")


class TpuCompileEngine(TpuEngine):
    """torch.compile(backend="tpu"), the whole step function as for inductor."""
    name = "tpu_compile"

    def set_mode(self):
        from torch._dynamo.backends.registry import lookup_backend
        compiler = getattr(self.torch_tpu, "compiler", None)
        if compiler is not None:
            compiler.register()  # a source checkout has no entry point
        try:
            lookup_backend("tpu")
        except Exception as e:  # Dynamo raises InvalidBackend for an unknown name
            raise Missing(f"torch.compile backend 'tpu' is not registered in this build ({type(e).__name__})") from e

    def compile(self, w):
        w.engine_compile(lambda fn: self.torch.compile(fn, backend="tpu"))


class TpuTrainStepEngine(TpuCompileEngine):
    """torch_tpu.TrainStep: forward, backward and AdamW traced into one program
    per step (training workloads; a decode step is compiled as by tpu_compile)."""
    name = "tpu_trainstep"

    def compile(self, w):
        parts = getattr(w.fn, "parts", None)
        if parts is None:
            return super().compile(w)
        if not hasattr(self.torch_tpu, "TrainStep"):
            raise Missing("this torch_tpu has no TrainStep")
        model, opt, loss_fn = parts
        w.fn = self.torch_tpu.TrainStep(model, loss_fn, opt)


class JaxEngine:
    """JAX jit on its CPU device: the step jitted whole, state donated."""
    name = "jax_jit"
    memory_kind = "rss_peak_delta"

    def prepare(self, cache_dir):
        if cache_dir:
            os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(cache_dir, "jax")
            # Cache every program, however small or quick to compile.
            os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
            os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
        os.environ.setdefault("JAX_PLATFORMS", "cpu")

    def load(self):
        try:
            import jax
        except ImportError as e:
            raise Missing(f"jax does not import: {e}") from e
        self.jax = jax
        from workloads import jax as jax_workloads
        self.workloads = jax_workloads

    def info(self):
        return {"jax": self.jax.__version__, "device": str(self.jax.devices()[0])}

    def start_memory(self):
        self.rss = RssPeak()

    def build(self, workload):
        return self.workloads.build(workload)

    def sync(self, out):
        self.jax.block_until_ready(out)

    def check(self, w, out):
        return float(w.check(out))

    def memory(self):
        return self.rss.bytes(), {"rss_peak_delta": self.rss.bytes()}


class TorchXlaEngine(TorchEngine):
    """PyTorch/XLA on its CPU device (PJRT_DEVICE=CPU), lazy tensors: a step is
    traced, then cut into one graph and run by torch_xla.sync()."""
    name = "torch_xla"

    def prepare(self, cache_dir):
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        self.cache_dir = cache_dir

    def load(self):
        try:
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
        except ImportError as e:
            raise Missing(f"torch_xla does not import: {e}") from e
        if self.cache_dir:  # must precede the first computation
            xr.initialize_cache(os.path.join(self.cache_dir, "torch_xla"), readonly=False)
        self.torch_xla, self.xm = torch_xla, xm
        self.device = torch_xla.device()  # before super().load(): not "cpu", so no denormal setting
        super().load()

    def info(self):
        return {**super().info(), "torch_xla": self.torch_xla.__version__, "device": str(self.device)}

    def sync(self, out):
        self.torch_xla.sync()
        self.xm.wait_device_ops()


ENGINES = {e.name: e for e in (TorchEngine, InductorEngine, TpuEngine, TpuFusedEngine,
                              TpuCompileEngine, TpuTrainStepEngine, JaxEngine, TorchXlaEngine)}
