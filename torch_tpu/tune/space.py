"""The candidate space: the knobs the tuner turns, their values and defaults.

A candidate is a dict {knob: value}; a knob left out has its default. Knobs:

  mode              "fused" (default: fused eager, the library's default),
                    "strict" (strict eager), "compile"
                    (torch.compile(step, backend="tpu")), "trainstep"
                    (torch_tpu.TrainStep; training workloads with an optimizer)
  matmul_precision  "highest" (default), "high", "medium": changes numerics on a
                    TPU, so tried only with the user's consent (allow_precision)
  shape_buckets     "pow2" (default), "off": for workloads with LENGTHS in a
                    compiled mode
  flash_attention_block, grouped_mm_tile
                    128 (default), 256, 512: the Pallas kernels' blocks
                    (torch_tpu/kernels/blocks.py), tried on a TPU plugin only:
                    elsewhere the kernels are not taken, or run interpreted,
                    which times nothing a TPU does
  batch_size        advice only (changes training): tried up to the memory limit
  pad               advice only: the model with its vocabulary-like sizes padded
                    to a multiple of 128 (the MXU's tile)
  layout            advice only, with a world size N: "ddpN" or "fsdpN", the
                    training step over N devices at the same global batch
                    (layout.py)

Other knobs (any other kernel's configurations) register here with
register_knob(); the worker applies them by importing their `apply` function,
so a registered knob works in fresh processes. The applied knobs are the ones
a settings file carries; advice knobs never are.
"""
import dataclasses
import importlib

from ..kernels import blocks as kernel_blocks

MODES = ("fused", "strict", "compile", "trainstep")  # the default first
PRECISIONS = ("highest", "high", "medium")
BUCKETS = ("pow2", "off")
PAD_MULTIPLE = 128


@dataclasses.dataclass(frozen=True)
class Knob:
    """name; values to try (the default first); numerics: whether a value
    other than the default may change results (flagged with the measured
    deviation); consent: tried only when the user allows numerics changes;
    apply: "module:function" called in the worker as function(value) before
    the workload is built (None for the built-in knobs, which the worker
    applies itself); platform: tried only where the workload's default run
    reports this PJRT platform (None: everywhere)."""
    name: str
    values: tuple
    numerics: bool = False
    consent: bool = False
    apply: str = None
    platform: str = None

    @property
    def default(self):
        return self.values[0]


BUILTIN = {
    "mode": Knob("mode", MODES),
    "matmul_precision": Knob("matmul_precision", PRECISIONS, numerics=True, consent=True),
    "shape_buckets": Knob("shape_buckets", BUCKETS),
    "flash_attention_block": Knob("flash_attention_block", kernel_blocks.VALUES, platform="tpu",
                                  apply="torch_tpu.kernels.blocks:set_flash_attention_block"),
    "grouped_mm_tile": Knob("grouped_mm_tile", kernel_blocks.VALUES, platform="tpu",
                            apply="torch_tpu.kernels.blocks:set_grouped_mm_tile"),
}
ADVICE = ("batch_size", "pad", "layout")
_registered = {}


def register_knob(knob):
    """Adds a knob (e.g. a kernel's block sizes, from the kernel bridge) to
    every later tuning run. Its `apply` must name an importable
    "module:function" taking the value."""
    if not isinstance(knob, Knob):
        raise TypeError(f"register_knob: expected a torch_tpu.tune.Knob, got {type(knob).__name__}")
    if knob.name in BUILTIN or knob.name in ADVICE:
        raise ValueError(f"register_knob: {knob.name!r} is a built-in knob")
    if not knob.values:
        raise ValueError(f"register_knob: knob {knob.name!r} has no values")
    if not knob.apply or ":" not in knob.apply:
        raise ValueError(f"register_knob: knob {knob.name!r} needs apply='module:function'")
    _registered[knob.name] = knob


def unregister_knob(name):
    _registered.pop(name, None)


def knobs():
    """Every knob that applies settings, built-in first, then registered."""
    return {**BUILTIN, **_registered}


def all_names():
    return tuple(knobs()) + ADVICE


def check_names(names):
    """Raises ValueError for a name that is no knob."""
    known = all_names()
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"torch_tpu.tune: unknown knob(s) {', '.join(map(repr, bad))}; "
                         f"the knobs are {', '.join(known)}")


def eager_mode(mode):
    """The eager mode a tuned `mode` runs its eager ops in: strict for
    "strict", the library's default (fused) for the others, compiled modes'
    eager ops included. The worker measures with it and apply() sets it."""
    return "strict" if mode == "strict" else "fused"


def default_candidate():
    return {}


def normalized(candidate):
    """The candidate without knobs at their defaults (its identity)."""
    ks = knobs()
    return {k: v for k, v in candidate.items() if not (k in ks and ks[k].default == v)}


def label(candidate):
    c = normalized(candidate)
    if not c:
        return "default (fused eager)"
    parts = []
    for k, v in c.items():
        if k == "mode":
            parts.insert(0, {"fused": "fused eager", "compile": "torch.compile", "trainstep": "TrainStep",
                             "strict": "strict eager"}[v])
        elif k == "pad":
            parts.append("padded copy" if v else "unpadded")
        elif k == "layout":
            kind, n = parse_layout(v)
            parts.insert(0, f"{kind.upper()} x{n}")
        else:
            parts.append(f"{k}={v}")
    return ", ".join(parts)


def parse_layout(value):
    """"ddp2" -> ("ddp", 2); raises ValueError for anything else."""
    for kind in ("fsdp", "ddp"):
        if isinstance(value, str) and value.startswith(kind) and value[len(kind):].isdigit():
            n = int(value[len(kind):])
            if n >= 2:
                return kind, n
    raise ValueError(f"torch_tpu.tune: a layout is 'ddpN' or 'fsdpN' with N >= 2, got {value!r}")


def hooks(candidate):
    """{knob: "module:function"} for the candidate's knobs that a function
    applies (registered and kernel knobs): what the worker process calls,
    since registrations live in this process."""
    return {n: k.apply for n, k in knobs().items() if k.apply and n in candidate}


def apply_hooks(candidate, hooks):
    """In the worker: calls each registered knob's apply(value)."""
    for name, where in hooks.items():
        module, fn = where.split(":", 1)
        getattr(importlib.import_module(module), fn)(candidate[name])
