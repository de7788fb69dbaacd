"""The tuned settings file: written by a tuning run, applied by one call or at
the next start.

    torch_tpu.tune.apply("tuned.json")          # in the program, or
    TORCH_TPU_TUNED=tuned.json python train.py  # applied when torch_tpu is imported

Applying sets what is process-wide: the eager mode (fused or strict), the
float32 matmul precision, the shape buckets, and registered knobs (by their
apply function). What is per step function — torch.compile or TrainStep —
the returned Tuned object applies to the step the program hands it:

    tuned = torch_tpu.tune.apply("tuned.json")
    step = tuned.train_step(model, loss_fn, optimizer)   # TrainStep, a compiled or an eager loop
    fn = tuned.compile(fn)                               # torch.compile(fn, backend="tpu") if tuned so

The file is JSON: {"torch_tpu_tuned": 1, "settings": {knob: value}, "hooks":
{knob: "module:function"}, then the run's table, advice and noise for the
reader (applying ignores them).
"""
import json
import os

from . import space

FORMAT = 1
ENV = "TORCH_TPU_TUNED"  # declared in settings.def; read in apply_from_environment


def write(path, result):
    doc = {"torch_tpu_tuned": FORMAT, **result.to_dict()}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def read(path):
    """-> (settings, hooks), checked: unknown knobs or values raise ValueError."""
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"torch_tpu.tune: {path} is not a tuned settings file (not JSON: {e})") from None
    if not isinstance(doc, dict) or doc.get("torch_tpu_tuned") != FORMAT:
        raise ValueError(f"torch_tpu.tune: {path} is not a tuned settings file of format {FORMAT}")
    settings, hooks = doc.get("settings", {}), doc.get("hooks", {})
    check(settings, hooks)
    return settings, hooks


def check(settings, hooks):
    builtin = space.BUILTIN
    for k, v in settings.items():
        if k in builtin:
            if v not in builtin[k].values:
                raise ValueError(f"torch_tpu.tune: setting {k}={v!r} is not one of {builtin[k].values}")
        elif k not in hooks:
            raise ValueError(f"torch_tpu.tune: unknown setting {k!r} (no apply function for it in the file)")


class Tuned:
    """The applied settings; `compile(fn)` and `train_step(...)` apply the
    tuned mode to a step function."""

    def __init__(self, settings):
        self.settings = dict(settings)
        self.mode = self.settings.get("mode", "fused")

    def compile(self, fn):
        if self.mode in ("compile", "trainstep"):
            import torch
            import torch_tpu.compiler
            torch_tpu.compiler.register()
            return torch.compile(fn, backend="tpu")
        return fn

    def train_step(self, model, loss_fn, optimizer):
        """step(*batch) -> loss, as the tuned mode runs it: TrainStep, a
        compiled loop or an eager loop (zero_grad, loss_fn(model, *batch),
        backward, optimizer.step())."""
        from ..train_step import TrainStep, eager_train_step

        if self.mode == "trainstep":
            return TrainStep(model, loss_fn, optimizer)
        return self.compile(eager_train_step(model, loss_fn, optimizer))

    def __repr__(self):
        return f"Tuned({self.settings})"


def apply(source):
    """Applies a settings file (a path) or a TuneResult; returns Tuned."""
    if hasattr(source, "settings") and hasattr(source, "pick"):
        settings, hooks = source.settings, space.hooks(source.pick.candidate)
        check(settings, hooks)
    else:
        settings, hooks = read(os.fspath(source))
    import torch
    import torch_tpu

    # Only the knobs the file names change; the others keep their values
    # (at a fresh start, the defaults the tuner compared against).
    if "mode" in settings:
        torch_tpu.set_eager_mode(space.eager_mode(settings["mode"]))
    if "matmul_precision" in settings:
        torch.set_float32_matmul_precision(settings["matmul_precision"])
    if "shape_buckets" in settings:
        import torch_tpu.compiler
        torch_tpu.compiler.set_shape_buckets(settings["shape_buckets"])
    space.apply_hooks(settings, hooks)
    return Tuned(settings)


def apply_from_environment():
    """At import: applies the file TORCH_TPU_TUNED names, if set. Returns
    Tuned or None (torch_tpu.tune.tuned() returns it later)."""
    from .. import settings

    path = settings.get(ENV)
    if not path:
        return None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{ENV}={path}: no such file")
    return apply(path)
