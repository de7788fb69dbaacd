"""TPU-pod launch: torchrun's ranks mapped onto libtpu's topology variables.

Under ``torchrun`` on a TPU VM (or a pod of them), one process per chip::

    import torch_tpu.distributed as tdist
    dist.init_process_group("tpu_dist")         # optional; gives the store
    tdist.set_tpu_launch_env()                  # before the first tpu tensor
    x = torch.ones(4, device="tpu")             # libtpu starts with that topology

libtpu reads its multi-process topology from environment variables when its
PJRT client starts, so these must be set first. For rank ``r`` on node ``g``
(torchrun's GROUP_RANK) with local rank ``l`` and ``L`` processes per host:

- ``TPU_VISIBLE_CHIPS = l`` and ``TPU_CHIPS_PER_PROCESS_BOUNDS = 1,1,1``:
  one chip per process;
- ``TPU_PROCESS_BOUNDS``: the slice's chip bounds, since each process is
  one chip. Assumption: a host's chips form ``host_layout`` (default 1 chip
  ``1,1,1``; 4 chips ``2,2,1``; 8 chips ``2,4,1`` -- the v5e/v6e host
  layouts), and the hosts stack along y, so ``H`` hosts give
  ``x, y*H, z``. Other generations or slice shapes: pass ``host_layout`` and
  ``hosts_bounds`` (how the hosts tile the slice, default ``1,H,1``);
- ``TPU_PROCESS_PORT = base_port + l``;
- ``TPU_PROCESS_ADDRESSES``: every process's ``host:port`` in rank order
  (``localhost`` on one host; with several hosts each node's address is
  published through the c10d Store and read back by all);
- ``CLOUD_TPU_TASK_ID = r``; ``TPU_WORKER_ID = g``;
  ``TPU_WORKER_HOSTNAMES``: the hosts' addresses in node order.

A variable the user already set is kept as it is (the user's value wins).
When a store is given or a process group is initialized, that store also
becomes the PJRT client's key-value store (PJRT_Client_Create's kv_get /
kv_put callbacks, as ``jax.distributed.initialize`` provides), under the
prefix ``tpu_pjrt_kv/``.
"""

import math
import os
import socket

from . import environment

DEFAULT_BASE_PORT = 8476  # libtpu's default TPU_PROCESS_PORT
DEFAULT_HOST_LAYOUTS = {1: (1, 1, 1), 4: (2, 2, 1), 8: (2, 4, 1)}
PJRT_KV_PREFIX = "tpu_pjrt_kv"  # PrefixStore adds the "/"
_HOST_KEY = "tpu_launch/host/"
LIBTPU_VARIABLES = (
    "TPU_VISIBLE_CHIPS",
    "TPU_CHIPS_PER_PROCESS_BOUNDS",
    "TPU_PROCESS_BOUNDS",
    "TPU_PROCESS_PORT",
    "TPU_PROCESS_ADDRESSES",
    "CLOUD_TPU_TASK_ID",
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
)


def _int_var(env, name, default=None):
    text = env.get(name)
    if text is None or text == "":
        if default is None:
            raise ValueError(f"{name} is not set; run under torchrun or set it")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{name}={value} is negative")
    return value


def _triple(name, value):
    if isinstance(value, str):
        value = value.split(",")
    try:
        t = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not three integers x,y,z") from None
    if len(t) != 3 or min(t) < 1:
        raise ValueError(f"{name}={value!r} is not three positive integers x,y,z")
    return t


def _bounds(t):
    return ",".join(str(v) for v in t)


def launch_topology(env):
    """(rank, local_rank, world_size, local_world_size, node_rank, hosts) from
    torchrun's variables in `env`, checked for consistency (ValueError names
    the variable)."""
    world = _int_var(env, "WORLD_SIZE")
    local_world = _int_var(env, "LOCAL_WORLD_SIZE")
    rank = _int_var(env, "RANK")
    local_rank = _int_var(env, "LOCAL_RANK")
    if world < 1:
        raise ValueError(f"WORLD_SIZE={world} must be at least 1")
    if local_world < 1:
        raise ValueError(f"LOCAL_WORLD_SIZE={local_world} must be at least 1")
    if world % local_world:
        raise ValueError(f"WORLD_SIZE={world} is not a multiple of LOCAL_WORLD_SIZE={local_world}")
    hosts = world // local_world
    if rank >= world:
        raise ValueError(f"RANK={rank} is not below WORLD_SIZE={world}")
    if local_rank >= local_world:
        raise ValueError(f"LOCAL_RANK={local_rank} is not below LOCAL_WORLD_SIZE={local_world}")
    node = _int_var(env, "GROUP_RANK", rank // local_world)
    if node >= hosts:
        raise ValueError(f"GROUP_RANK={node} is not below the number of hosts {hosts} (WORLD_SIZE/LOCAL_WORLD_SIZE)")
    if rank != node * local_world + local_rank:
        raise ValueError(
            f"RANK={rank} is not GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK={node * local_world + local_rank}: "
            "ranks must be numbered host by host, as torchrun does"
        )
    return rank, local_rank, world, local_world, node, hosts


def compute_tpu_launch_env(
    env, host_addresses=None, chips_per_host=None, host_layout=None, hosts_bounds=None, base_port=DEFAULT_BASE_PORT
):
    """libtpu's variables for this process, from torchrun's variables in `env`
    (a mapping; nothing is read from or written to os.environ).

    `host_addresses`: every host's address in node order (one per host; may be
    omitted on one host, where it is ``localhost``). `chips_per_host` defaults
    to the product of `host_layout`, else LOCAL_WORLD_SIZE; `host_layout`
    defaults by chip count (see the module doc). Returns the full dict of
    computed values; user-set variables are not consulted here."""
    rank, local_rank, world, local_world, node, hosts = launch_topology(env)
    slice_addresses = _slice_addresses(env, world, local_world)
    if host_addresses is None and slice_addresses is not None:
        host_addresses = [slice_addresses[g * local_world].rpartition(":")[0] for g in range(hosts)]
    if host_layout is not None:
        host_layout = _triple("host_layout", host_layout)
    if chips_per_host is None:
        chips_per_host = math.prod(host_layout) if host_layout else local_world
    if not isinstance(chips_per_host, int) or chips_per_host < 1:
        raise ValueError(f"chips_per_host={chips_per_host!r} is not a positive integer")
    if local_rank >= chips_per_host:
        raise ValueError(f"LOCAL_RANK={local_rank} is not below the host's {chips_per_host} chips")
    if local_world != chips_per_host:
        raise ValueError(
            f"LOCAL_WORLD_SIZE={local_world} is not the host's {chips_per_host} chips: "
            "one process per chip (torchrun --nproc-per-node=<chips>)"
        )
    if host_layout is None:
        if chips_per_host not in DEFAULT_HOST_LAYOUTS:
            raise ValueError(
                f"no default chip layout for {chips_per_host} chips per host; pass host_layout=(x, y, z)"
            )
        host_layout = DEFAULT_HOST_LAYOUTS[chips_per_host]
    if math.prod(host_layout) != chips_per_host:
        raise ValueError(f"host_layout={_bounds(host_layout)} does not hold {chips_per_host} chips")
    hosts_bounds = _triple("hosts_bounds", hosts_bounds) if hosts_bounds is not None else (1, hosts, 1)
    if math.prod(hosts_bounds) != hosts:
        raise ValueError(f"hosts_bounds={_bounds(hosts_bounds)} does not hold {hosts} hosts")
    if host_addresses is None:
        if hosts != 1:
            raise ValueError(f"{hosts} hosts (WORLD_SIZE/LOCAL_WORLD_SIZE) need host_addresses, one per host")
        host_addresses = ["localhost"]
    host_addresses = [str(a) for a in host_addresses]
    if len(host_addresses) != hosts or not all(host_addresses):
        raise ValueError(f"host_addresses has {len(host_addresses)} entries for {hosts} hosts: {host_addresses}")
    if not isinstance(base_port, int) or not 0 < base_port <= 65535 - local_world:
        raise ValueError(f"base_port={base_port!r} leaves no room for {local_world} ports")
    process_bounds = tuple(h * c for h, c in zip(hosts_bounds, host_layout))
    addresses = [f"{host_addresses[r // local_world]}:{base_port + r % local_world}" for r in range(world)]
    port = str(base_port + local_rank)
    if slice_addresses is not None:
        addresses, port = slice_addresses, slice_addresses[rank].rpartition(":")[2]
    if environment.TOPOLOGY_VAR in env:
        process_bounds = environment.parse_topology(env[environment.TOPOLOGY_VAR])
        if math.prod(process_bounds) != world:
            raise ValueError(
                f"{environment.TOPOLOGY_VAR}={env[environment.TOPOLOGY_VAR]} holds {math.prod(process_bounds)} chips, "
                f"not WORLD_SIZE={world}")
    return {
        "TPU_VISIBLE_CHIPS": str(local_rank),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": _bounds(process_bounds),
        "TPU_PROCESS_PORT": port,
        "TPU_PROCESS_ADDRESSES": ",".join(addresses),
        "CLOUD_TPU_TASK_ID": str(rank),
        "TPU_WORKER_ID": str(node),
        "TPU_WORKER_HOSTNAMES": ",".join(host_addresses),
    }


def _slice_addresses(env, world, local_world):
    """TORCH_TPU_SLICEBUILDER_ADDRESSES of `env`, checked (one per rank, each
    host's ranks together), or None when unset."""
    if environment.ADDRESSES_VAR not in env:
        return None
    addresses = environment.parse_addresses(env[environment.ADDRESSES_VAR])
    if len(addresses) != world:
        raise ValueError(f"{environment.ADDRESSES_VAR} names {len(addresses)} processes, not WORLD_SIZE={world}")
    hosts = [a.rpartition(":")[0] for a in addresses]
    for r in range(world):
        if hosts[r] != hosts[r - r % local_world]:
            raise ValueError(
                f"{environment.ADDRESSES_VAR}: rank {r} is on {hosts[r]}, not on its node's host "
                f"{hosts[r - r % local_world]} (LOCAL_WORLD_SIZE={local_world} ranks per host, in rank order)")
    return addresses


def exchange_host_addresses(store, node, hosts, local_rank, address):
    """Every host's address in node order: local rank 0 of each node publishes
    `address` under ``tpu_launch/host/<node>`` and all read every node's."""
    if local_rank == 0:
        store.set(f"{_HOST_KEY}{node}", address)
    keys = [f"{_HOST_KEY}{g}" for g in range(hosts)]
    store.wait(keys)
    return [store.get(k).decode() for k in keys]


def _default_store():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.distributed_c10d._get_default_store()
    return None


def register_client_store(store):
    """Makes the c10d `store` (under ``tpu_pjrt_kv/``) the PJRT client's
    key-value store; `None` unregisters. RuntimeError once the client runs."""
    import torch.distributed as dist

    from .. import _C

    _C._set_pjrt_kv_store(None if store is None else dist.PrefixStore(PJRT_KV_PREFIX, store))


def set_tpu_launch_env(
    store=None,
    host_address=None,
    chips_per_host=None,
    host_layout=None,
    hosts_bounds=None,
    base_port=DEFAULT_BASE_PORT,
    env=None,
    nproc_per_node=None,
):
    """With `nproc_per_node`, TorchTPU's parent-side step: sets
    TORCH_TPU_SLICEBUILDER_ADDRESSES and TORCH_TPU_TOPOLOGY for that many
    processes on this host (environment.set_tpu_launch_env) and returns them.

    Otherwise, in a rank: sets libtpu's topology variables for this torchrun process (see the
    module doc) and registers the c10d Store as the PJRT client's key-value
    store. Must run before the PJRT client starts (RuntimeError after).

    `store`: a c10d Store shared by all ranks; defaults to the initialized
    default process group's. Needed with more than one host, where each host
    publishes `host_address` (default: this machine's hostname). A variable
    already set in the environment is kept. Returns the values in effect."""
    if nproc_per_node is not None:
        return environment.set_tpu_launch_env(nproc_per_node, env=env)
    from .. import _C

    if _C._is_initialized():
        raise RuntimeError(
            "set_tpu_launch_env must run before the PJRT client starts (before the first tpu tensor or "
            "torch.tpu device query); the client of this process is already running"
        )
    env = os.environ if env is None else env
    rank, local_rank, world, local_world, node, hosts = launch_topology(env)
    if store is None:
        store = _default_store()
    host_addresses = None
    if hosts > 1 and environment.ADDRESSES_VAR not in env:
        if store is None:
            raise ValueError(
                f"{hosts} hosts need a c10d store to exchange their addresses: pass store= or call "
                "dist.init_process_group first"
            )
        address = host_address or socket.gethostname()
        host_addresses = exchange_host_addresses(store, node, hosts, local_rank, address)
    computed = compute_tpu_launch_env(
        env,
        host_addresses=host_addresses,
        chips_per_host=chips_per_host,
        host_layout=host_layout,
        hosts_bounds=hosts_bounds,
        base_port=base_port,
    )
    if store is not None:
        register_client_store(store)
    effective = {}
    for name, value in computed.items():
        if name not in env:  # the user's own setting wins
            env[name] = value
        effective[name] = env[name]
    return effective


__all__ = ["compute_tpu_launch_env", "launch_topology", "register_client_store", "set_tpu_launch_env"]
