"""Collectives across the tpu devices of one process, as one XLA program.

Each function takes one tpu tensor per device, tensor ``i`` on ``tpu:i``
(equal shapes and dtypes), and returns one result per device, on that
device. The collective is a StableHLO op (``stablehlo.all_reduce``,
``all_gather``, ``reduce_scatter``, ``all_to_all``, ``collective_permute``)
in a module of ``num_replicas = len(tensors)``, compiled with a device
assignment that puts replica ``i`` on ``tpu:i`` and launched once over all
the devices: the data moves inside XLA, not through the host. This is the
in-process transport; collectives between processes go through the
``tpu_dist`` c10d backend (see ``torch_tpu.distributed``).

``op`` is a ``torch.distributed.ReduceOp`` (SUM, PRODUCT, MIN, MAX, AVG) or
its name; AVG (floating dtypes only) is SUM then a division by the device
count, inside the same program.
"""

from typing import List, Optional, Sequence, Tuple

import torch

_OPS = {"sum": "sum", "product": "product", "min": "min", "max": "max", "avg": "avg"}


def _op_name(op) -> str:
    name = op if isinstance(op, str) else getattr(op, "name", None)
    if name is None:
        # torch.distributed.ReduceOp members are RedOpType values.
        name = str(op).rsplit(".", 1)[-1]
    key = name.lower()
    if key not in _OPS:
        raise ValueError(f"spmd collectives: unsupported reduce op {op!r}; use SUM, PRODUCT, MIN, MAX or AVG")
    return _OPS[key]


def _check(tensors: Sequence[torch.Tensor], what: str) -> List[torch.Tensor]:
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"spmd {what}: expected a list with one tpu tensor per device, got {type(tensors).__name__}")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"spmd {what}: expected one tpu tensor per device, got none")
    from .. import _C

    count = _C._device_count()
    if len(tensors) > count:
        raise ValueError(f"spmd {what}: {len(tensors)} tensors but this process has only {count} tpu devices")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"spmd {what}: element {i} is a {type(t).__name__}, not a tensor")
        if t.device.type != "tpu" or t.device.index != i:
            raise ValueError(f"spmd {what}: tensor {i} is on {t.device}; tensor i must be on tpu:i")
        if t.dtype != first.dtype or t.shape != first.shape:
            raise ValueError(
                f"spmd {what}: tensor {i} is {t.dtype} {tuple(t.shape)} but tensor 0 is "
                f"{first.dtype} {tuple(first.shape)}; all tensors must have the same shape and dtype"
            )
    return tensors


def _run(tensors, what, kind, op="sum", dim=0, concat_dim=0, pairs=()):
    from .. import _C

    tensors = _check(tensors, what)
    return list(_C._spmd_collective(tensors, kind, op, dim, concat_dim, list(pairs)))


def spmd_all_reduce(tensors: Sequence[torch.Tensor], op="sum") -> List[torch.Tensor]:
    """Every device gets the reduction of all the tensors (elementwise)."""
    return _run(tensors, "all_reduce", "all_reduce", _op_name(op))


def spmd_all_gather(tensors: Sequence[torch.Tensor], dim: int = 0) -> List[torch.Tensor]:
    """Every device gets ``torch.cat(tensors, dim)``."""
    return _run(tensors, "all_gather", "all_gather", dim=dim)


def spmd_reduce_scatter(tensors: Sequence[torch.Tensor], op="sum", dim: int = 0) -> List[torch.Tensor]:
    """Reduces all tensors, then device ``i`` keeps block ``i`` of ``dim``
    (whose size must divide by the device count)."""
    return _run(tensors, "reduce_scatter", "reduce_scatter", _op_name(op), dim=dim)


def spmd_all_to_all(tensors: Sequence[torch.Tensor], split_dim: int = 0, concat_dim: Optional[int] = None) -> List[torch.Tensor]:
    """Device ``j`` sends block ``k`` of ``split_dim`` to device ``k``; device
    ``k`` concatenates the blocks it receives, in device order, along
    ``concat_dim`` (default: ``split_dim``)."""
    return _run(
        tensors, "all_to_all", "all_to_all", dim=split_dim, concat_dim=split_dim if concat_dim is None else concat_dim
    )


def spmd_permute(tensors: Sequence[torch.Tensor], pairs: Sequence[Tuple[int, int]]) -> List[torch.Tensor]:
    """Device ``src`` sends its tensor to ``dst`` for each ``(src, dst)`` in
    ``pairs`` (each source and each target at most once); a device that
    receives nothing gets zeros."""
    pairs = [tuple(p) for p in pairs]
    if any(len(p) != 2 for p in pairs):
        raise ValueError("spmd permute: pairs must be (source, target) device indices")
    return _run(tensors, "permute", "permute", pairs=pairs)


def spmd_program_text(kind: str, n: int, shape, dtype: torch.dtype, op="sum", dim=0, concat_dim=None, pairs=()) -> str:
    """The StableHLO module the functions above compile for ``n`` tensors of
    ``shape`` and ``dtype`` (``kind``: all_reduce, all_gather,
    reduce_scatter, all_to_all or permute)."""
    from .. import _C

    reduce_op = _op_name(op) if kind in ("all_reduce", "reduce_scatter") else "sum"
    return _C._spmd_program_text(
        n, list(shape), dtype, kind, reduce_op, dim, dim if concat_dim is None else concat_dim, [tuple(p) for p in pairs]
    )


__all__ = [
    "spmd_all_gather",
    "spmd_all_reduce",
    "spmd_all_to_all",
    "spmd_permute",
    "spmd_program_text",
    "spmd_reduce_scatter",
]
