"""torch.distributed on tpu: the ``tpu_dist`` c10d backend.

``import torch_tpu`` registers ``tpu_dist`` as the backend for device ``tpu``,
so each of these works under ``torchrun``::

    dist.init_process_group("tpu_dist")
    dist.init_process_group()                       # the default for tpu
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")

The backend is C++ (``csrc/backend/distributed``). On XLA's CPU plugin, which cannot
run collectives between processes, it carries each collective over a gloo
backend created on the same store, with host copies: the tpu values are read
to the host, gloo reduces or moves them, and the results are written back into
the tpu tensors' storages in place. JAX does the same for multi-process CPU.
Before a collective moves data, the ranks exchange a small signature of their
arguments and all raise the same error when they differ (gloo would abort the
process); ``TORCH_TPU_DIST_CHECK=0`` turns that check off.

Within one process, ``spmd_all_reduce``, ``spmd_all_gather``,
``spmd_reduce_scatter``, ``spmd_all_to_all`` and ``spmd_permute``
(``spmd.py``) run a collective over several tpu devices as one XLA program of
N replicas, the stablehlo collective running inside XLA.

On a TPU pod, ``set_tpu_launch_env`` (``launch_env.py``) maps torchrun's
ranks onto libtpu's topology variables and hands the c10d Store to the PJRT
client as its key-value store; it must run before the first tpu tensor.
Google's TorchTPU launch contract (``environment.py``): the parent calls
``set_tpu_launch_env(nproc_per_node=N)`` (or ``prepare_tpu_environment(N)``)
before spawning; a rank that finds TORCH_TPU_SLICEBUILDER_ADDRESSES applies
it when it creates its ``tpu_dist`` process group, before its device starts.
Also reachable as ``torch.tpu.distributed``.
"""
import os


import torch.distributed as dist

from . import environment, launch_env, spmd
from .environment import prepare_tpu_environment
from .in_process import RankError, launch_in_process
from .launch_env import compute_tpu_launch_env, register_client_store, set_tpu_launch_env
from .spmd import *  # noqa: F401,F403  (the spmd_* collectives: spmd.__all__, listed in __all__ below)

BACKEND_NAME = "tpu_dist"
# Store keys of the inner gloo transport, and the records of failed
# collectives (csrc/backend/distributed/missing_ranks.h), live under these
# prefixes, apart from any other backend of the same group.
_GLOO_PREFIX = "tpu_dist_gloo/"
_STATUS_PREFIX = "tpu_dist_status/"


def _create_backend(opts, pg_options=None):
    """c10d's creator (extended API): one tpu_dist backend for one group.
    `opts` is c10d's _DistributedBackendOptions; `pg_options` (backend
    options passed to init_process_group / new_group) has nothing to set."""
    from .. import _C
    from .in_process import current_launch

    launch = current_launch()
    if launch is not None:
        # Every rank of the group is a thread on its own device of this
        # process's PJRT client: collectives run as XLA programs over them.
        from .device_transport import DeviceTransportGroup

        return DeviceTransportGroup(launch, opts.group_rank, opts.group_size, list(opts.global_ranks_in_group),
                                    opts.group_id or "default", opts.timeout)
    if environment.ADDRESSES_VAR in os.environ and not _C._is_initialized():
        # The parent ran TorchTPU's launch step: libtpu's variables for this rank.
        launch_env.set_tpu_launch_env(store=opts.store)
    store = dist.PrefixStore(_GLOO_PREFIX, opts.store)
    gloo = dist.ProcessGroupGloo(store, opts.group_rank, opts.group_size, opts.timeout)
    status = dist.PrefixStore(_STATUS_PREFIX, opts.store)
    return _C._TpuDistBackend(
        gloo, status, opts.group_rank, opts.group_size, opts.timeout.total_seconds(), opts.group_id or "default"
    )


def transport(group=None) -> str:
    """How ``group``'s tpu collectives move data: ``"device"`` (each collective
    one XLA program over the group's devices: in-process ranks from
    ``launch_in_process``) or ``"host"`` (host copies over gloo: processes on
    the CPU plugin)."""
    g = group if group is not None else dist.distributed_c10d._get_default_group()
    if getattr(g, "transport", None) == "device":
        return "device"
    try:
        backend = g._get_backend(dist.distributed_c10d.torch.device("tpu"))
    except RuntimeError:
        backend = None
    if backend is not None and backend.name() == BACKEND_NAME:
        return "host"
    raise ValueError(f"group {g} has no tpu_dist backend for tpu")


def register():
    """Registers ``tpu_dist`` with c10d for device ``tpu`` (idempotent)."""
    if not dist.is_available() or not dist.is_gloo_available():
        return
    if BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["tpu"])


__all__ = [
    "BACKEND_NAME",
    "compute_tpu_launch_env",
    "environment",
    "launch_in_process",
    "RankError",
    "transport",
    "prepare_tpu_environment",
    "register",
    "register_client_store",
    "set_tpu_launch_env",
    *spmd.__all__,
]
