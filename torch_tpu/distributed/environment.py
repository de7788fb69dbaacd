"""TorchTPU's parent-side launch step: ``torch.tpu.distributed.environment``.

Google's TorchTPU starts a multi-process job in two steps. The parent (the
process that runs torchrun or mp.spawn) names every process's address and the
slice's chip topology::

    from torch.tpu.distributed import environment
    environment.set_tpu_launch_env(nproc_per_node=4)   # or, in a shell:
    eval $(python -m torch.tpu.distributed.environment --nproc_per_node=4 | sed 's/^/export /')
    torchrun --nproc_per_node=4 train.py

and each rank reads them when its device starts. The variables:

- ``TORCH_TPU_SLICEBUILDER_ADDRESSES``: ``host:port`` of every process, in
  rank order (one free local port per process on one host);
- ``TORCH_TPU_TOPOLOGY``: the chips of the slice as ``XxY`` or ``XxYxZ``
  (``x,y,z`` accepted), one chip per process: 1 -> ``1x1``, 4 -> ``2x2``,
  8 -> ``2x4``, other counts ``1xN``.

Here a rank maps them onto libtpu's own variables (``TPU_PROCESS_ADDRESSES``,
``TPU_PROCESS_PORT``, ``TPU_WORKER_HOSTNAMES``, ``TPU_PROCESS_BOUNDS``; see
``launch_env.py``) when it creates its ``tpu_dist`` process group or calls
``set_tpu_launch_env()`` itself, before its first tpu tensor. XLA's CPU plugin
ignores them. A variable already set is kept (the user's value wins).
"""
import argparse
import math
import os
import shlex
import socket
import sys

ADDRESSES_VAR = "TORCH_TPU_SLICEBUILDER_ADDRESSES"
TOPOLOGY_VAR = "TORCH_TPU_TOPOLOGY"
_DEFAULT_TOPOLOGIES = {1: "1x1", 4: "2x2", 8: "2x4"}


def parse_topology(text):
    """(x, y, z) chips from ``XxY``, ``XxYxZ`` or ``x,y,z``; ValueError names
    the variable."""
    parts = str(text).replace(",", "x").split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"{TOPOLOGY_VAR}={text!r} is not XxY, XxYxZ or x,y,z") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise ValueError(f"{TOPOLOGY_VAR}={text!r} is not XxY, XxYxZ or x,y,z with positive sizes")
    return tuple(dims + [1] * (3 - len(dims)))


def parse_addresses(text):
    """The ``host:port`` list of TORCH_TPU_SLICEBUILDER_ADDRESSES, checked."""
    out = []
    for a in str(text).split(","):
        host, sep, port = a.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{ADDRESSES_VAR}: {a!r} is not host:port")
        out.append(f"{host}:{int(port)}")
    return out


def default_topology(nproc):
    return _DEFAULT_TOPOLOGIES.get(nproc, f"1x{nproc}")


def _free_ports(count):
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("localhost", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def set_tpu_launch_env(nproc_per_node, env=None):
    """Parent side: sets TORCH_TPU_SLICEBUILDER_ADDRESSES (one free local
    port per process) and TORCH_TPU_TOPOLOGY for `nproc_per_node` processes
    on this host, keeping values already set (checked against the count).
    `env` defaults to os.environ. Returns the two values in effect."""
    if isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int) or nproc_per_node < 1:
        raise ValueError(f"nproc_per_node={nproc_per_node!r} is not a positive integer")
    env = os.environ if env is None else env
    if ADDRESSES_VAR not in env:
        env[ADDRESSES_VAR] = ",".join(f"localhost:{p}" for p in _free_ports(nproc_per_node))
    if TOPOLOGY_VAR not in env:
        env[TOPOLOGY_VAR] = default_topology(nproc_per_node)
    addresses = parse_addresses(env[ADDRESSES_VAR])
    if len(addresses) != nproc_per_node:
        raise ValueError(f"{ADDRESSES_VAR} names {len(addresses)} processes, not nproc_per_node={nproc_per_node}")
    chips = math.prod(parse_topology(env[TOPOLOGY_VAR]))
    if chips != nproc_per_node:
        raise ValueError(f"{TOPOLOGY_VAR}={env[TOPOLOGY_VAR]} holds {chips} chips, not nproc_per_node={nproc_per_node}")
    return {ADDRESSES_VAR: env[ADDRESSES_VAR], TOPOLOGY_VAR: env[TOPOLOGY_VAR]}


def prepare_tpu_environment(world_size):
    """TorchTPU's single-host launcher step: set_tpu_launch_env(nproc_per_node=world_size)."""
    return set_tpu_launch_env(nproc_per_node=world_size)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m torch.tpu.distributed.environment",
        description="Prints the launch variables of a one-host tpu job as NAME=value lines "
        "(eval $(... | sed 's/^/export /')).")
    p.add_argument("--nproc_per_node", "--nproc-per-node", type=int, required=True)
    args = p.parse_args(argv)
    try:
        values = set_tpu_launch_env(args.nproc_per_node, env=dict(os.environ))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, value in values.items():
        print(f"{name}={shlex.quote(value)}")
    return 0


__all__ = ["parse_addresses", "parse_topology", "prepare_tpu_environment", "set_tpu_launch_env"]

if __name__ == "__main__":
    sys.exit(main())
