"""torch.tpu.precision: the float32 matmul precision of tpu programs.

TorchTPU's names: ``torch.tpu.Precision`` (DEFAULT, HIGH, HIGHEST, StableHLO's
dot_general precisions) and ``torch.tpu.precision(p)``, a context manager
that is also a setter (like ``torch.set_grad_enabled``: the call sets it,
leaving the ``with`` block restores the previous one)::

    with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
        c = a @ b          # one bf16 pass
    torch.tpu.precision(torch.tpu.Precision.HIGH)   # from here on

It holds for the whole process, as torch.set_float32_matmul_precision does
(TorchTPU's is per thread; here the autograd engine runs a tpu backward on its
own thread, which must use the forward's setting). Unset, tpu programs follow
``torch.get_float32_matmul_precision()``: "highest" (PyTorch's default, kept
here; TorchTPU's own default is one bf16 pass) -> HIGHEST, "high" -> HIGH,
"medium" -> DEFAULT. It applies to float32 matmuls, linear layers,
convolutions and attention, in every mode (eager, fused, torch.compile); each
precision has its own programs in the caches.

Numerics of DEFAULT: the float32 operands are rounded to bfloat16 (round to
nearest even) and multiplied with a float32 accumulator, as a TPU's MXU does
in one pass. The program says so itself (a reduce_precision to 8 exponent and
7 mantissa bits before the dot), so every plugin gives the TPU's result, XLA's
CPU plugin included, which otherwise computes float32 whatever the precision
says. HIGH (three bf16 passes, about 16 significant bits) and HIGHEST are
computed as float32 on plugins without bf16 passes.
"""
import enum

import torch

from . import _C


class Precision(enum.Enum):
    DEFAULT = "default"  # one bf16 pass
    HIGH = "high"  # three bf16 passes (bf16x3)
    HIGHEST = "highest"  # full float32 (six bf16 passes on a TPU)


# lowering::MatmulPrecision (csrc/lowering/helpers.h)
_CODES = {Precision.HIGHEST: 0, Precision.HIGH: 1, Precision.DEFAULT: 2}
_FROM_CODE = {v: k for k, v in _CODES.items()}
_FROM_TORCH = {"highest": Precision.HIGHEST, "high": Precision.HIGH, "medium": Precision.DEFAULT}


def _as_precision(p):
    if isinstance(p, Precision):
        return p
    if isinstance(p, str):
        try:
            return Precision(p.lower())
        except ValueError:
            pass
    raise ValueError(
        f"torch.tpu.precision: expected torch.tpu.Precision.DEFAULT, HIGH or HIGHEST "
        f"(or 'default', 'high', 'highest'), got {p!r}")


def get_precision():
    """The precision float32 matmuls on tpu use now: the one set with
    precision(), else the one torch.get_float32_matmul_precision() names."""
    code = _C._matmul_precision_override()
    if code >= 0:
        return _FROM_CODE[code]
    return _FROM_TORCH[torch.get_float32_matmul_precision()]


class precision:
    """Sets the float32 matmul precision of tpu programs on construction; as a
    context manager, restores the previous setting on exit. ``None`` clears
    the setting (back to following torch.get_float32_matmul_precision())."""

    def __init__(self, p):
        code = -1 if p is None else _CODES[_as_precision(p)]
        self._previous = _C._matmul_precision_override()
        _C._set_matmul_precision_override(code)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_matmul_precision_override(self._previous)
        return False


def _numerics():
    """What selects a program's numerics besides its inputs (the compiled-graph
    caches key by it): the effective precision and the XLA options
    (torch.backends.tpu)."""
    return (get_precision().value, _C._allow_excess_precision(), _C._xla_optimization_level())


__all__ = ["Precision", "get_precision", "precision"]
