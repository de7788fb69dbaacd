"""Where the in-process ranks of one group meet for each collective.

Every rank of a group calls `Rendezvous.join` with the same sequence number
for its n-th collective, its argument signature and its payload. The last
rank to arrive checks that the signatures agree, then runs the collective
once for all of them (`run(payloads) -> results`, one per rank) and wakes
the others; each rank gets its own result. A mismatch raises the same error
on every rank before anything runs. A rank that is absent past the timeout,
or whose thread failed (`Launch.fail`), makes the waiting ranks raise.
"""
import threading
import time
from typing import Any, Callable, Dict, List, Optional


class RankFailed(RuntimeError):
    """Raised on the ranks that wait for a rank whose thread failed."""


class Launch:
    """State shared by the rank threads of one launch_in_process: one lock
    and condition for all its rendezvous, and the ranks that failed."""

    def __init__(self, world_size: int, timeout: float = 60.0):
        self.world_size = world_size
        self.timeout = timeout
        # (rank, c10d group) -> how many programs over that group's ranks
        # the rank has joined (compiler/replicated_graph.py); the n-th of
        # each rank meet.
        self.program_seq: Dict[tuple, int] = {}
        self.cond = threading.Condition()
        self.failed: Dict[int, BaseException] = {}
        self.groups: Dict[str, "Rendezvous"] = {}
        self.pairs: Dict[tuple, "Rendezvous"] = {}

    def fail(self, rank: int, error: BaseException):
        with self.cond:
            self.failed[rank] = error
            self.cond.notify_all()

    def group(self, name: str, size: int) -> "Rendezvous":
        with self.cond:
            if name not in self.groups:
                self.groups[name] = Rendezvous(self, size, name)
            return self.groups[name]

    def pair(self, key: tuple) -> "Rendezvous":
        """The 2-party rendezvous of send/recv between two ranks (global ids)."""
        with self.cond:
            if key not in self.pairs:
                self.pairs[key] = Rendezvous(self, 2, f"send/recv {key[0]}->{key[1]} tag {key[2]}")
            return self.pairs[key]


class _Slot:
    def __init__(self, size):
        self.sigs: List[Any] = [None] * size
        self.payloads: List[Any] = [None] * size
        self.arrived = 0
        self.taken = 0
        self.running = False
        self.results: Optional[List[Any]] = None
        self.error: Optional[BaseException] = None


class Rendezvous:
    def __init__(self, launch: Launch, size: int, name: str):
        self.launch = launch
        self.size = size
        self.name = name
        self.slots: Dict[int, _Slot] = {}

    def join(self, seq: int, index: int, ranks: List[int], what: str, sig, payload,
             run: Callable[[List[Any]], List[Any]], timeout: float):
        """`index`: this party's place (0..size-1); `ranks`: the global rank
        of each place, for messages; returns this party's result."""
        launch = self.launch
        deadline = time.monotonic() + timeout
        with launch.cond:
            slot = self.slots.setdefault(seq, _Slot(self.size))
            slot.sigs[index] = sig
            slot.payloads[index] = payload
            slot.arrived += 1
            if slot.arrived == self.size:
                slot.running = True
                differ = [ranks[i] for i, s in enumerate(slot.sigs) if s != slot.sigs[0]]
                if differ:
                    lines = "; ".join(f"rank {ranks[i]}: {s}" for i, s in enumerate(slot.sigs))
                    slot.error = RuntimeError(
                        f"{what}: the ranks' arguments differ (collective {seq} of {self.name}): {lines}")
                else:
                    launch.cond.release()
                    try:
                        slot.results = run(slot.payloads)
                    except BaseException as e:  # every rank raises the same error
                        slot.error = e
                    finally:
                        launch.cond.acquire()
                slot.running = False
                launch.cond.notify_all()
            while slot.results is None and slot.error is None:
                absent = [ranks[i] for i, s in enumerate(slot.sigs) if s is None]
                failed = {r: launch.failed[r] for r in absent if r in launch.failed}
                if failed:
                    r, e = next(iter(failed.items()))
                    raise RankFailed(f"{what}: rank {r} failed before joining collective {seq} of {self.name}: "
                                     f"{type(e).__name__}: {e}")
                left = deadline - time.monotonic()
                if left <= 0 and not slot.running:
                    raise RuntimeError(f"{what}: rank(s) {absent} did not join collective {seq} of {self.name} "
                                       f"within {timeout:g} s")
                launch.cond.wait(max(left, 0.05) if not slot.running else 0.5)
            slot.taken += 1
            if slot.taken == self.size:
                del self.slots[seq]
            if slot.error is not None:
                raise slot.error
            return slot.results[index]
