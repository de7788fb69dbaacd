"""Logs, after each optimizer step, how many XLA programs this rank built during the step.

Installed through TorchTitan's `ModelSpec.post_optimizer_build_fn` (its hook for
work on the built optimizers), so TorchTitan is unchanged. Each rank prints

    tpu programs: rank R step S built B compiled C (X.XX s)

where B counts program cache misses in the step (torch_tpu's program cache,
`torch_tpu.cache_info()`: eager ops, fused clusters and compiled graphs) and C the
XLA compilations among them (a program loaded from the persistent compile cache
is a miss but not a compilation). Nothing is printed when torch_tpu is not loaded
(the CPU reference run).
"""
import os
import sys

PREFIX = "tpu programs:"


def _with_program_counter(post_optimizer_build_fn):
    def build(optimizers, model_parts, parallel_dims):
        if post_optimizer_build_fn is not None:
            post_optimizer_build_fn(optimizers, model_parts, parallel_dims)
        if "torch_tpu" not in sys.modules:
            return
        import torch_tpu

        rank = int(os.environ.get("RANK", "0"))
        last = dict(torch_tpu.cache_info())
        step = [0]

        def count(*_args, **_kwargs):
            nonlocal last
            now = dict(torch_tpu.cache_info())
            step[0] += 1
            print(f"{PREFIX} rank {rank} step {step[0]} built {now['misses'] - last['misses']} "
                  f"compiled {now['compiles'] - last['compiles']} "
                  f"({now['compile_seconds'] - last['compile_seconds']:.2f} s)", flush=True)
            last = now

        optimizers.register_step_post_hook(count)

    return build


def count_programs_per_step(model_spec) -> None:
    """Adds the per-step program count to a TorchTitan ModelSpec."""
    model_spec.post_optimizer_build_fn = _with_program_counter(model_spec.post_optimizer_build_fn)
