"""The Dynamo backend named "tpu"."""
import itertools

import torch

_counter = itertools.count()
_registered = False


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        from .compiled_graph import CompiledGraph
        saved_from = None
        if kind == "forward":
            # The forward returns (mutated inputs, outputs, bases) and then the
            # values saved for backward, which only the backward graph reads.
            context = torch._guards.TracingContext.try_get()
            if context is not None and context.fw_metadata is not None:
                saved_from = context.fw_metadata.num_forward
        graph = CompiledGraph(gm, f"{kind}_{next(_counter)}", saved_from)

        def run(args):
            return graph(args)

        run._boxed_call = True  # AOTAutograd passes one list that we may clear
        run.graph = graph
        return run
    return compile_graph


def tpu_backend(gm, example_inputs, **kwargs):
    """A Dynamo backend: pass to torch.compile as backend="tpu" (or this function)."""
    from torch._dynamo.backends.common import aot_autograd
    from .decompositions import tpu_decompositions
    from .tracing_overrides import install
    install()
    aot = aot_autograd(
        fw_compiler=_compiler("forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        decompositions=tpu_decompositions(),
        keep_inference_input_mutations=False,
    )
    return aot(gm, example_inputs, **kwargs)


def register():
    """Registers the "tpu" name with Dynamo (done lazily: importing Dynamo
    costs about a second, so a plain `import torch_tpu` does not)."""
    global _registered
    if _registered:
        return
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "tpu" not in _BACKENDS:
        register_backend(tpu_backend, name="tpu")
    _registered = True
