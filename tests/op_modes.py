"""The three ways an op test row runs on tpu: strict eager, fused eager and
torch.compile(backend="tpu").

`running(mode)` is a context manager yielding a Mode whose `wrap` turns a
row's callable into the one that runs in that mode, `settle` makes device
inputs ready (so that what a call records or compiles is the call alone),
and `assert_repeat_compiles_nothing` checks that calling it again with the
same inputs compiles no program: no XLA compile (cache_info), no fused
cluster compile (fused_stats) and no Dynamo graph or program
(compile_stats).
"""
import contextlib

import torch
import torch_tpu

MODES = ("strict", "fused", "compile")

# Dynamo keys its cache by code object, and every compiled row shares the
# wrapper's; each test starts from a reset, and the limit only has to cover
# the variants one row compiles (contiguous, non-contiguous, in-place,
# out=, gradients).
_RECOMPILE_LIMIT = 64


def counters():
    """Every counter of a compilation, in every mode."""
    cache, fused, comp = torch_tpu.cache_info(), torch_tpu.fused_stats(), torch_tpu.compile_stats()
    return {"xla compiles": cache["compiles"], "fused cluster compiles": fused["compiles"],
            "dynamo graphs": comp["graphs"], "graph programs compiled": comp["compiles"],
            "graph recompiles": comp["recompiles"]}


def external_modules_inlined():
    """External-op modules (kernels) inlined into the programs built so far,
    lowered or reused."""
    s = torch_tpu._C._external_stats()
    return s["lowered"] + s["reused"]


def observe(result):
    """Reads every tensor of a result back to the host (this runs pending
    fused clusters)."""
    if isinstance(result, torch.Tensor):
        result.cpu()
    elif isinstance(result, (list, tuple)):
        for r in result:
            observe(r)


class Mode:
    def __init__(self, name):
        self.name = name

    def wrap(self, fn):
        """The callable that runs `fn` in this mode."""
        return fn

    def settle(self, tensors):
        """Runs whatever is pending for `tensors` (inputs made on tpu)."""
        if self.name == "fused":
            torch.tpu.synchronize()
        return tensors

    def assert_repeat_compiles_nothing(self, call):
        """`call()` (a repeat of a call already made once) compiles nothing."""
        before = counters()
        observe(call())
        after = counters()
        grown = {k: after[k] - before[k] for k in before if after[k] != before[k]}
        assert not grown, f"{self.name}: a second identical call compiled again: {grown}"

    def assert_compiled(self, ops):
        """The ATen ops `ops` were compiled into a graph program (checked in
        compile mode; eager modes never use graph-only rules)."""


class CompileMode(Mode):
    """torch.compile(fn, backend="tpu", dynamic=False): every call of a
    wrapped fn must hand Dynamo's graphs to the tpu backend, and every graph
    must become a program (none may run op by op)."""

    def __init__(self):
        super().__init__("compile")
        self.op_counts = torch_tpu.compile_stats()["op_counts"]

    def assert_compiled(self, ops):
        now = torch_tpu.compile_stats()["op_counts"]
        missing = [op for op in ops if now.get(op, 0) == self.op_counts.get(op, 0)]
        assert not missing, f"no compiled program contains {missing}"

    def wrap(self, fn):
        # A Python frame for Dynamo to trace: a builtin (torch.add) has none.
        def call(*args, **kwargs):
            return fn(*args, **kwargs)

        compiled = torch.compile(call, backend="tpu", fullgraph=False, dynamic=False)

        def run(*args, **kwargs):
            before = torch_tpu.compile_stats()
            out = compiled(*args, **kwargs)
            after = torch_tpu.compile_stats()
            eager = {k: v for k, v in after["eager_graphs"].items() if k not in before["eager_graphs"]}
            assert not eager, f"compiled graphs ran op by op instead of as one program: {eager}"
            if not run.called:
                assert after["graphs"] > before["graphs"], "Dynamo handed no graph to the tpu backend"
            run.called = True
            return out

        run.called = False

        return run


@contextlib.contextmanager
def running(mode):
    if mode == "strict":
        yield Mode("strict")
    elif mode == "fused":
        with torch_tpu.eager_mode("fused"):
            yield Mode("fused")
    elif mode == "compile":
        import torch._dynamo
        from torch_tpu.compiler import register
        register()
        torch._dynamo.reset()
        cfg = torch._dynamo.config
        with cfg.patch(recompile_limit=_RECOMPILE_LIMIT, fail_on_recompile_limit_hit=True):
            try:
                yield CompileMode()
            finally:
                torch._dynamo.reset()
    else:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
