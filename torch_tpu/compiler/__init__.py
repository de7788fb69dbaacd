"""torch.compile(model, backend="tpu"): Dynamo captures the graph,
AOTAutograd splits forward and backward and functionalises them, and each
ATen graph becomes one StableHLO program built with the same lowering rules
eager mode uses. Graph breaks run eagerly on tpu."""
from .backend import tpu_backend, register
from .buckets import set_shape_buckets
from .stats import compile_stats, reset_compile_stats

__all__ = ["tpu_backend", "register", "compile_stats", "reset_compile_stats", "set_shape_buckets"]
