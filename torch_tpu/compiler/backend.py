"""The Dynamo backend named "tpu"."""
import itertools

import torch

_counter = itertools.count()
_registered = False


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        from .compiled_graph import CompiledGraph
        saved_from, updates = None, ()
        context = torch._guards.TracingContext.try_get()
        meta = context.fw_metadata if context is not None and kind != "backward" else None
        if meta is not None:
            updates = _input_updates(meta)
            if kind == "forward":
                # The forward returns (mutated inputs, outputs, bases) and then the
                # values saved for backward, which only the backward graph reads.
                saved_from = meta.num_forward
        graph = CompiledGraph(gm, f"{kind}_{next(_counter)}", saved_from, updates)
        graph.build_ahead(example_inputs)

        def run(args):
            return graph(args)

        run._boxed_call = True  # AOTAutograd passes one list that we may clear
        run.graph = graph
        return run
    return compile_graph


def _input_updates(meta):
    """(input, output) pairs: the forward or inference graph returns input
    `input`'s new value as output `output`, which AOTAutograd then copies into
    it (a data mutation). The program may update those inputs in place."""
    updates = []
    for k, i in enumerate(meta.mutated_inp_runtime_indices):
        info = meta.input_info[i]
        if info.mutates_data and not info.mutates_metadata and not info.mutates_storage_metadata:
            updates.append((i, k))
    return tuple(updates)


def tpu_backend(gm, example_inputs, **kwargs):
    """A Dynamo backend: pass to torch.compile as backend="tpu" (or this function)."""
    from torch._dynamo.backends.common import aot_autograd
    from .compiled_graph import compile_ahead_enabled
    from .decompositions import tpu_decompositions
    from ..patches import dynamo_cudagraph_check, multilabel_margin_tracing
    dynamo_cudagraph_check.install()
    multilabel_margin_tracing.install()
    aot = aot_autograd(
        fw_compiler=_compiler("forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        decompositions=tpu_decompositions(),
        keep_inference_input_mutations=False,
    )
    if not compile_ahead_enabled():
        return aot(gm, example_inputs, **kwargs)
    # The backward is handed to bw_compiler now, not at the first backward,
    # so that its program builds (CompiledGraph.build_ahead) beside the forward's.
    with torch._functorch.config.patch(force_non_lazy_backward_lowering=True):
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
    from ..patches import dynamo_cudagraph_check
    dynamo_cudagraph_check.install()
    _registered = True
