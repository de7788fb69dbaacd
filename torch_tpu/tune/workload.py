"""What the tuner tunes: a workload, named so that a fresh process can build it.

Two forms, defined at module level in a script or an importable module:

* The model form (the tuner builds the step itself, so it can also try
  TrainStep, other batch sizes and a padded copy of the model):
    make_model()                 -> torch.nn.Module (on any device; moved to tpu)
    make_batch(batch_size[, length=L]) -> a tuple of tensors (moved to tpu)
    loss_fn(model, *batch)       -> the scalar loss; without it the step is
                                    inference, model(*batch) under no_grad
    make_optimizer(model)        -> optional; default AdamW(lr=1e-3)
    BATCH_SIZE                   -> optional; default 8
    LENGTHS                      -> optional list of sequence lengths: the
                                    steps cycle through them (shape buckets)
    TOKENS_PER_SAMPLE            -> optional; default: a 2-D integer first
                                    batch tensor's second size, else 1
* The step form (any step, e.g. a decode loop feeding its output back):
    make_step(device) -> torch_tpu.tune.Step(fn, args, carry=None, model=None,
                                             loss_fn=None, optimizer=None, tokens=1)
  `model`, `loss_fn` and `optimizer` (all three) let the tuner try TrainStep.

`describe()` turns the user's input into a JSON-able source; `load()` turns
the source back into a Step inside the worker process.
"""
import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
import types

MODEL_FORM = ("make_model", "make_batch")
STEP_FORM = "make_step"
DEFAULT_BATCH_SIZE = 8


@dataclasses.dataclass
class Step:
    """One step: `fn(*args)` runs it; `carry(out)` (optional) gives the next
    step's args from its outputs; `check(out)` a scalar tensor compared across
    candidates (default: the sum of the first output tensor); `tokens` per
    step, for tokens/s."""
    fn: object
    args: tuple
    carry: object = None
    model: object = None
    loss_fn: object = None
    optimizer: object = None
    tokens: int = 1
    check: object = None
    batches: list = None   # the model form with LENGTHS: one args tuple per length, cycled

    def run(self, i):
        args = self.batches[i % len(self.batches)] if self.batches else self.args
        out = self.fn(*args)
        if self.carry is not None:
            self.args = tuple(self.carry(out))
        return out

    def check_value(self, out):
        if self.check is not None:
            return float(self.check(out))
        while isinstance(out, (tuple, list)):
            out = out[0]
        return float(out.detach().float().sum().item())

    @property
    def trainable(self):
        return self.model is not None and self.loss_fn is not None and self.optimizer is not None


def describe(workload=None, script_args=(), **functions):
    """The user's workload as a JSON-able source the worker can load.

    workload: a script path, a module or module name, or None with keyword
    functions (make_model=..., make_batch=..., loss_fn=..., make_optimizer=...,
    or make_step=...), each a module-level function."""
    if workload is not None and functions:
        raise TypeError("torch_tpu.tune: give either a workload (script or module) or its functions, not both")
    if isinstance(workload, (str, os.PathLike)) and str(workload).endswith(".py"):
        path = os.path.abspath(os.fspath(workload))
        if not os.path.isfile(path):
            raise FileNotFoundError(f"torch_tpu.tune: no workload script {path}")
        return {"script": path, "args": [str(a) for a in script_args]}
    if isinstance(workload, types.ModuleType):
        workload = workload.__name__
    if isinstance(workload, str):
        return {"module": workload, "sys_path": list(sys.path)}
    if workload is not None:
        raise TypeError(f"torch_tpu.tune: a workload is a script path, a module or module functions, "
                        f"got {type(workload).__name__}")
    unknown = set(functions) - {"make_model", "make_batch", "loss_fn", "make_optimizer", "make_step"}
    if unknown:
        raise TypeError(f"torch_tpu.tune: unknown workload functions {sorted(unknown)}")
    if not functions:
        raise TypeError("torch_tpu.tune: no workload (give a script, a module, make_step=..., "
                        "or make_model=... and make_batch=...)")
    return {"functions": {k: _locate(k, f) for k, f in functions.items() if f is not None},
            "sys_path": list(sys.path)}


def _locate(role, fn):
    """(module or script, qualified name) of a module-level function."""
    name = getattr(fn, "__qualname__", "")
    if not callable(fn) or "<" in name or "." in name:
        raise TypeError(f"torch_tpu.tune: {role} must be a module-level function (the tuner rebuilds the "
                        f"workload in fresh processes), got {fn!r}")
    module = fn.__module__
    if module == "__main__":
        path = inspect.getsourcefile(fn)
        if not path:
            raise TypeError(f"torch_tpu.tune: {role} is defined in an interactive session; define it in a file")
        return {"script": os.path.abspath(path), "name": name}
    return {"module": module, "name": name}


def _namespace(source):
    """The attributes the workload defines: a script's globals or a module's."""
    if "script" in source:
        path = source["script"]
        argv, sys.argv = sys.argv, [path] + list(source.get("args", []))
        sys.path.insert(0, os.path.dirname(path))
        # A real module in sys.modules: Dynamo imports a traced function's module.
        name = "__tune_workload_%x__" % (hash(path) & 0xFFFFFFFF)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            return vars(module)
        finally:
            sys.argv = argv
    return vars(importlib.import_module(source["module"]))


def _functions(source):
    for p in reversed(source.get("sys_path", [])):
        if p not in sys.path:
            sys.path.append(p)
    if "functions" not in source:
        return _namespace(source)
    scripts = {}
    found = {}
    for role, where in source["functions"].items():
        key = where.get("script") or where["module"]
        if key not in scripts:
            scripts[key] = _namespace(where)
        found[role] = scripts[key][where["name"]]
    return found


def load(source, device, batch_size=None, wrap=None):
    """Builds the workload's Step on `device` (in the worker process).
    wrap: for the model form, applied to the model on its device before the
    optimizer is built (DDP, FSDP2). Returns (step, info): info says what the
    workload allows the tuner to try."""
    import torch

    from ..train_step import eager_train_step

    ns = _functions(source)
    if STEP_FORM in ns:
        if batch_size is not None:
            raise ValueError("torch_tpu.tune: a make_step workload has no batch-size knob")
        if wrap is not None:
            raise ValueError("torch_tpu.tune: a make_step workload has no model to lay out over devices")
        step = ns[STEP_FORM](device)
        if not isinstance(step, Step):
            raise TypeError(f"torch_tpu.tune: make_step must return torch_tpu.tune.Step, got {type(step).__name__}")
        return step, {"form": "step", "training": step.trainable, "batch_size": None, "lengths": None}
    missing = [n for n in MODEL_FORM if n not in ns]
    if missing:
        raise TypeError(f"torch_tpu.tune: the workload defines neither make_step nor {' and '.join(missing)} "
                        f"(see torch_tpu.tune.workload for the contract)")
    default_bs = int(ns.get("BATCH_SIZE", DEFAULT_BATCH_SIZE))
    bs = default_bs if batch_size is None else int(batch_size)
    lengths = ns.get("LENGTHS")
    model = ns["make_model"]().to(device)
    if wrap is not None:
        model = wrap(model)
    loss_fn = ns.get("loss_fn")

    def to_device(batch):
        batch = batch if isinstance(batch, (tuple, list)) else (batch,)
        return tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in batch)

    if lengths:
        batches = [to_device(ns["make_batch"](bs, length=int(n))) for n in lengths]
    else:
        batches = [to_device(ns["make_batch"](bs))]
    first = batches[0][0]
    per_sample = ns.get("TOKENS_PER_SAMPLE")
    if per_sample is None:
        per_sample = first.shape[1] if first.dim() == 2 and not first.is_floating_point() else 1
    tokens = bs * int(per_sample)
    if lengths:  # the mean tokens of a step over the cycle
        tokens = int(round(sum(b[0].shape[0] * b[0].shape[1] for b in batches) / len(batches)))
    if loss_fn is not None:
        make_opt = ns.get("make_optimizer") or (lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3))
        opt = make_opt(model)
        step = Step(eager_train_step(model, loss_fn, opt), batches[0], model=model, loss_fn=loss_fn, optimizer=opt,
                    tokens=tokens)
    else:
        @torch.no_grad()
        def infer_step(*batch):
            return model(*batch)
        step = Step(infer_step, batches[0], model=model, tokens=tokens)
    if lengths:
        step.batches = batches
    return step, {"form": "model", "training": loss_fn is not None, "batch_size": bs,
                  "default_batch_size": default_bs, "lengths": list(lengths) if lengths else None}
