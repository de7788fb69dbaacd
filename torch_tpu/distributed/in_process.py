"""N ranks in one process, each a thread on its own tpu device.

``launch_in_process(fn, world_size)`` starts ``world_size`` threads; thread
``r`` makes ``tpu:r`` its current device, joins a ``tpu_dist`` default group
of rank ``r`` (a store shared by the threads) and calls ``fn(rank,
world_size, *args)``. The group's collectives take the device transport
(``device_transport.py``): all the ranks' devices belong to this process's
PJRT client, so each collective is one XLA program over them. Returns the
ranks' return values in rank order. A rank that raises makes the ranks that
wait for it raise too (``RankFailed``), and the launch raises the first
rank's error, naming it; a rank that never arrives makes the others raise
after ``timeout``. The ranks run strict eager, whatever the process's mode.
"""
import datetime
import threading
from typing import Any, Callable, List, Optional

import torch
import torch.distributed as dist

from .rendezvous import Launch

_local = threading.local()


def current_launch() -> Optional[Launch]:
    """The launch the calling thread is a rank of, or None."""
    return getattr(_local, "launch", None)


def join_program(what: str, ranks: List[int], group: str, sig, inputs, run: Callable[[List[Any]], List[Any]]):
    """This rank's part of one program over the ranks `ranks` (global ranks,
    this one among them) of c10d group `group`: the n-th call of each of
    those ranks for that group meet; the last to arrive checks that their
    signatures agree and calls `run(inputs of every rank, in `ranks` order)`,
    which returns one result per rank. Raises as a collective does when a
    rank differs, fails, or stays away past the launch's timeout."""
    launch = current_launch()
    if launch is None:
        raise RuntimeError(f"{what}: not on a launch_in_process rank")
    rank = _local.rank
    key = (rank, group)
    launch.program_seq[key] = launch.program_seq.get(key, 0) + 1
    rdv = launch.group(f"compiled programs of group {group}", len(ranks))
    return rdv.join(launch.program_seq[key], ranks.index(rank), ranks, what, sig, inputs, run, launch.timeout)


class RankError(RuntimeError):
    """A launch_in_process rank raised; `errors` maps rank -> its exception."""

    def __init__(self, errors):
        self.errors = dict(sorted(errors.items()))
        first = next(iter(self.errors))
        e = self.errors[first]
        others = ", ".join(str(r) for r in self.errors if r != first)
        super().__init__(f"rank {first} raised {type(e).__name__}: {e}"
                         + (f" (ranks {others} raised too)" if others else ""))


def _join(threads, timeout, errors):
    """Waits for the rank threads; once one has ended, a rank still running
    ``timeout`` seconds after the last one ended is reported as hung (its
    daemon thread is left behind)."""
    import time

    alive = list(threads)
    last_end = None
    while alive:
        alive[0].join(0.05)
        ended = [t for t in alive if not t.is_alive()]
        if ended:
            last_end = time.monotonic()
            alive = [t for t in alive if t.is_alive()]
        elif last_end is not None and time.monotonic() - last_end > timeout:
            for t in alive:
                rank = threads.index(t)
                errors.setdefault(rank, TimeoutError(f"rank {rank} did not finish within {timeout:g} s of the "
                                                     "other ranks"))
            return


def launch_in_process(fn: Callable[..., Any], world_size: int, *args,
                      timeout: datetime.timedelta = datetime.timedelta(seconds=60),
                      backend: str = "tpu_dist") -> List[Any]:
    """Runs ``fn(rank, world_size, *args)`` on ``world_size`` in-process
    ranks (rank r on tpu:r) under a ``tpu_dist`` default group, and returns
    their results in rank order. ``timeout`` bounds each collective's wait."""
    from .. import _C
    from .._eager_mode import eager_mode
    from ..patches import thread_local_world

    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"launch_in_process: world_size must be a positive int, got {world_size!r}")
    count = _C._device_count()
    if world_size > count:
        raise ValueError(f"launch_in_process: {world_size} ranks need {world_size} tpu devices; this process has "
                         f"{count} (set TORCH_TPU_NUM_DEVICES before the first tpu tensor)")
    if current_launch() is not None:
        raise RuntimeError("launch_in_process: called from a rank of another launch")
    thread_local_world.install()
    launch = Launch(world_size, timeout.total_seconds())
    store = dist.HashStore()
    results: List[Any] = [None] * world_size
    errors = {}

    def rank_main(rank):
        _local.launch = launch
        _local.rank = rank
        thread_local_world.begin_rank_thread()
        try:
            torch.tpu.set_device(rank)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
            try:
                # Autograd's state is per thread: without this, a backward
                # runs on the engine's thread for the device, outside the
                # rank's c10d world and launch.
                with torch.autograd.set_multithreading_enabled(False):
                    results[rank] = fn(rank, world_size, *args)
            finally:
                dist.destroy_process_group()
        except BaseException as e:
            errors[rank] = e
            launch.fail(rank, e)
        finally:
            thread_local_world.end_rank_thread()
            _local.launch = None

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"tpu_dist rank {r}", daemon=True)
               for r in range(world_size)]
    # The ranks run strict eager (restored after): fused eager has one pending
    # cluster per process, and the threads' interleaved ops would cut it at
    # other points every step, each cut a new program.
    with eager_mode("strict"):
        for t in threads:
            t.start()
        _join(threads, timeout.total_seconds(), errors)
    if errors:
        raise RankError(errors) from errors[min(errors)]
    return results
