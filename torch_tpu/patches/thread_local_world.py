"""c10d's process-group world becomes per thread for in-process ranks.

torch.distributed keeps its groups in one process-wide `_World`
(`torch.distributed.distributed_c10d._world`, documented there as an
extension point) and its group-name registry in C++. Ranks that run as
threads of one process (torch_tpu.distributed.launch_in_process) each need
their own default group, as PyTorch's threaded test groups have
(torch.testing._internal.distributed.multi_threaded_pg). This replaces
`_world` with a view that gives each launched rank thread a world of its own
and every other thread the original world, and turns on c10d's per-thread
group registry (`_set_thread_isolation_mode`) and DTensor's lock around
its shared fake-tensor mode (`ShardingPropagator._fake_mode_lock`, a null
context unless threaded ranks set it). DTensor's sharding propagation makes
its fake inputs with the mesh's bare device type ("tpu"); fake mode gives
such a factory the thread's current device, but its dispatch cache, shared
by every thread, keys it on the bare type, so rank 1 could get rank 0's
`tpu:0` back. The fake inputs get the thread's indexed device instead.
Installed by the first launch_in_process, not at import.
"""
import threading

import torch

from .record import Patch, mark

NAME = "thread_local_world"
_local = threading.local()


class ThreadLocalWorld:
    """`_world` for every thread: a launched rank's own `_World`, else the
    process's original one."""

    def __init__(self, original):
        object.__setattr__(self, "_original", original)

    def _current(self):
        return getattr(_local, "world", None) or object.__getattribute__(self, "_original")

    def __getattr__(self, name):
        return getattr(self._current(), name)

    def __setattr__(self, name, value):
        setattr(self._current(), name, value)


def _rank_world():
    """A `_World` whose state is its own: c10d's `_World` keeps its group maps
    in module globals, shared by every instance."""
    import torch.distributed.distributed_c10d as c10d

    def field(name):
        def get(self):
            return self._own[name]

        def put(self, value):
            self._own[name] = value

        return property(get, put)

    class RankWorld(c10d._World):
        def __init__(self):
            super().__init__()
            self._own = {"pg_map": {}, "pg_names": {}, "pg_group_ranks": {}, "pg_backend_config": {},
                         "group_count": 0, "tags_to_pg": {}, "pg_to_tag": {}}

    for name in ("pg_map", "pg_names", "pg_group_ranks", "pg_backend_config", "group_count", "tags_to_pg",
                 "pg_to_tag"):
        setattr(RankWorld, name, field(name))
    return RankWorld()


def begin_rank_thread():
    """Gives the calling thread a fresh c10d world (a launched rank)."""
    _local.world = _rank_world()


def end_rank_thread():
    _local.world = None


def install():
    import torch.distributed.distributed_c10d as c10d

    if isinstance(c10d._world, ThreadLocalWorld):
        return
    c10d._world = ThreadLocalWorld(c10d._world)
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    # DTensor's sharding propagation runs ops on fake tensors in a fake mode
    # shared by the threads; its hook for threaded ranks is this lock.
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    ShardingPropagator._fake_mode_lock = threading.Lock()
    import torch.distributed.tensor._op_schema as op_schema

    op_schema._rebuild_tensor_from_dtensor_meta = mark(_fake_input_on_current_device, NAME)


def _fake_input_on_current_device(spec):
    """A fake tensor for `spec` on the calling thread's device of the mesh's
    type (an indexed device, so fake mode's cache tells the ranks apart)."""
    meta = spec.tensor_meta
    if meta is None:
        raise AssertionError("DTensorSpec does not contain tensor_meta.")
    kind = spec.mesh.device_type
    module = getattr(torch, kind, None)
    device = torch.device(kind, module.current_device()) if kind != "cpu" and hasattr(module, "current_device") else kind
    return torch.empty_strided(meta.shape, meta.stride, dtype=meta.dtype, device=device)


def installed():
    import torch.distributed.distributed_c10d as c10d

    return isinstance(c10d._world, ThreadLocalWorld)


PATCH = Patch(
    name=NAME,
    targets=("torch.distributed.distributed_c10d._world", "torch._C._distributed_c10d._set_thread_isolation_mode",
             "torch.distributed.tensor._sharding_prop.ShardingPropagator._fake_mode_lock",
             "torch.distributed.tensor._op_schema._rebuild_tensor_from_dtensor_meta"),
    reason=("c10d keeps one default group per process; ranks run as threads of one process (the device transport "
            "on one PJRT client) each need their own, as PyTorch's threaded test groups do. DTensor's sharding propagation makes fake "
            "inputs on the mesh's bare device type, which fake mode's shared dispatch cache would hand from one rank "
            "thread's device to another's; they get the thread's indexed device."),
    issue=None,
    versions={"torch": ("2.13.0",)},
    when="the first torch_tpu.distributed.launch_in_process",
    scope=("threads started by launch_in_process get their own world; every other thread keeps the original one. "
           "Group names are registered per thread from then on."),
    install=install,
    installed=installed,
)
