"""vLLM's compiler interface on tpu: the model graph vLLM hands over
becomes XLA programs through ``torch.compile``'s "tpu" backend
(torch_tpu.compiler), with symbolic token counts rounded up to torch_tpu's
shape buckets. A whole model graph whose attention ops
``attention_in_graph.rewrite`` replaces is one program per bucket, with the
KV caches and the step's attention tensors as extra inputs, and a second
program writes the step's keys and values into the caches; otherwise each
piece vLLM splits off between attention ops is one."""

from vllm.compilation.compiler_interface import CompilerInterface

from . import attention_in_graph


class TpuCompiler(CompilerInterface):
    name = "tpu"

    def compile(self, graph, example_inputs, compiler_config, compile_range, key=None):
        import torch._functorch.config as functorch_config

        from torch_tpu.compiler import tpu_backend

        rewritten = attention_in_graph.rewrite(graph, example_inputs)
        # AOTAutograd's cache stores Inductor's output code only; the tpu
        # programs are cached by torch_tpu's own (persistent) compile cache.
        with functorch_config.patch(enable_autograd_cache=False):
            if rewritten is None:
                return tpu_backend(graph, example_inputs), None
            extras, step_inputs, num_outputs = rewritten
            compiled = tpu_backend(graph, list(example_inputs) + extras)

        def run(*args):
            caches, slot_mapping, token_rows, block_table = step_inputs(args)
            results = compiled(*args, *caches, token_rows, block_table)
            attention_in_graph.write_step_rows(slot_mapping, caches, results[num_outputs:])
            return tuple(results[:num_outputs])

        return run, None
