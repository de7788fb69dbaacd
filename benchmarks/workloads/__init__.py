"""Benchmark workloads, each defined once per framework: workloads/torch/<name>.py
(plain PyTorch, runs on any torch device) and workloads/jax/<name>.py (the same
math in JAX). Both draw their parameters and inputs from workloads/init.py, so
every engine starts from the same numbers and their losses can be compared."""

NAMES = ("mlp", "gpt2", "llama_decode", "convnet", "kv_cache")  # the default run
# Run only when named (--workloads): a step takes seconds, too long for every run.
EXTRA = ("gpt_100m",)
ALL = NAMES + EXTRA
