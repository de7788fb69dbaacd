"""torch_tpu.tune: measures the knobs a TPU user would otherwise tune by hand
and keeps the fastest.

    import torch_tpu
    result = torch_tpu.tune("train.py", budget_s=300)     # or torch_tpu.tune.tune(...)
    print(result.table())
    result.save("tuned.json")
    tuned = torch_tpu.tune.apply("tuned.json")            # or TORCH_TPU_TUNED=tuned.json at the next start
    step = tuned.train_step(model, loss_fn, optimizer)

From the shell: python -m torch_tpu.tune train.py --budget 300 --out tuned.json

The workload contract (make_model / make_batch / loss_fn, or make_step) is in
torch_tpu/tune/workload.py; the knobs in space.py; how candidates are
measured in worker.py and noise.py; the search and its budget in search.py.
docs/tune.md is the user's page.
"""
import numbers
import sys
import types

from . import settings_file as _settings_file
from .settings_file import Tuned
from .space import Knob, register_knob, unregister_knob
from .workload import Step

__all__ = ["tune", "apply", "tuned", "Step", "Knob", "register_knob", "unregister_knob", "Tuned"]

_tuned_at_start = None


def tune(workload=None, *, budget_s=120.0, knobs=None, allow_precision=False, world_size=None, steps_planned=0,
         sample_s=1.0, tolerance=0.02, max_repeats=4, max_batch_factor=4, out=None, progress=True,
         script_args=(), **functions):
    """Tunes a workload within `budget_s` seconds of wall time; returns a
    TuneResult (its .table(), .settings, .advice, .save(path)).

    workload: a script path, a module (or its name), or the workload's
    module-level functions as keywords (make_model=, make_batch=, loss_fn=,
    make_optimizer=, or make_step=); see torch_tpu.tune.workload.
    knobs: names to try (default: all; see torch_tpu.tune.space).
    allow_precision: consent to try float32 matmul precisions, which change
    numerics on a TPU (each such row shows its measured deviation).
    world_size: also DDP and FSDP2 over that many devices: measured over
        in-process ranks (knob "layout"), and modelled for a TPU slice.
    steps_planned: when given, compile time counts, spread over that many
    steps (otherwise the steady step time alone decides).
    out: also write the settings file there."""
    from . import search, space, workload as _workload

    if isinstance(budget_s, bool) or not isinstance(budget_s, numbers.Real) or not budget_s > 0:
        raise ValueError(f"torch_tpu.tune: budget_s must be a positive number of seconds, got {budget_s!r}")
    if isinstance(knobs, str):
        raise TypeError("torch_tpu.tune: knobs is a list of names, e.g. ['mode', 'batch_size']")
    names = space.all_names() if knobs is None else tuple(knobs)
    space.check_names(names)
    if knobs is not None and "matmul_precision" in names and not allow_precision:
        raise ValueError("torch_tpu.tune: matmul_precision changes numerics on a TPU; pass allow_precision=True "
                         "to consent to trying it")
    if world_size is not None and (not isinstance(world_size, int) or world_size < 1):
        raise ValueError(f"torch_tpu.tune: world_size must be a positive integer, got {world_size!r}")
    if steps_planned < 0 or sample_s <= 0 or max_repeats < 1:
        raise ValueError("torch_tpu.tune: steps_planned >= 0, sample_s > 0 and max_repeats >= 1 are required")
    source = _workload.describe(workload, script_args, **functions)
    result = search.search(source, float(budget_s), names, allow_precision=allow_precision, world_size=world_size,
                           steps_planned=steps_planned, sample_s=sample_s, tolerance=tolerance,
                           max_repeats=max_repeats, max_batch_factor=max_batch_factor, progress=progress)
    if out:
        result.save(out)
    return result


def apply(source):
    """Applies a tuned settings file (or a TuneResult) to this process and
    returns Tuned (its .compile(fn) and .train_step(model, loss_fn, opt)
    apply the tuned mode to a step)."""
    return _settings_file.apply(source)


def tuned():
    """The Tuned that TORCH_TPU_TUNED applied when torch_tpu was imported, or None."""
    return _tuned_at_start


def _apply_at_start():
    global _tuned_at_start
    _tuned_at_start = _settings_file.apply_from_environment()


class _CallableModule(types.ModuleType):
    """So that torch_tpu.tune(...) is the tuner, as the module it also is."""

    def __call__(self, *args, **kwargs):
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
