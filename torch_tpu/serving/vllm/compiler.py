"""vLLM's compiler interface on tpu: each piece of the model graph that vLLM
splits off (between attention ops) becomes one XLA program through
``torch.compile``'s "tpu" backend (torch_tpu.compiler), with symbolic token
counts rounded up to torch_tpu's shape buckets."""

from vllm.compilation.compiler_interface import CompilerInterface


class TpuCompiler(CompilerInterface):
    name = "tpu"

    def compile(self, graph, example_inputs, compiler_config, compile_range, key=None):
        import torch._functorch.config as functorch_config

        from torch_tpu.compiler import tpu_backend

        # AOTAutograd's cache stores Inductor's output code only; the tpu
        # programs are cached by torch_tpu's own (persistent) compile cache.
        with functorch_config.patch(enable_autograd_cache=False):
            return tpu_backend(graph, example_inputs), None
