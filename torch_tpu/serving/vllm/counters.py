"""torch_tpu's program counters and step clock of a serving process, for
benchmarks.

With ``TORCH_TPU_VLLM_COUNTERS=<file>`` in the environment, the tpu worker
writes ``{"cache_info": torch_tpu.cache_info(), "compile_stats": {...},
"steps": {...}}`` as JSON to that file after warm-up and after every step, replacing
the file atomically, so another process (benchmarks/serving.py) can read how
many programs the engine compiled, and where its steps' time went, without
an endpoint. Unset (the default), nothing is written and each step pays one
environment lookup.

``steps`` sums, over the steps served since warm-up (``STEP_KEYS``):
- ``prepare_s``: building the step's inputs on the host and copying them to
  the device (``_prepare_inputs``);
- ``forward_s``: the rest of ``execute_model``: dispatching the model's
  compiled pieces and the attention ops between them;
- ``sample_s``: ``sample_tokens`` less ``wait_s``: dispatching the sampler;
- ``wait_s``: blocked on the device for the sampled tokens (program time not
  overlapped with dispatch, and the device-to-host copy);
- ``idle_s``: from one step's end to the next one's start (the engine's
  scheduler, output processing, waiting for requests, and this file's
  write, about 1.5 ms);
- ``launches``: programs run (program cache hits and misses).
"""

import json
import os
import time

from ... import settings

ENV = "TORCH_TPU_VLLM_COUNTERS"
# compile_stats keys worth a reader's time (the per-op tables are left out).
_COMPILE_KEYS = ("graphs", "compiles", "recompiles", "compile_seconds", "bucketed_compiles")

_last_key = None


def report(force: bool = False) -> None:
    """Writes the counters to $TORCH_TPU_VLLM_COUNTERS if they changed since
    the last write (or ``force``); a no-op when the variable is unset."""
    global _last_key
    path = settings.get(ENV)
    if not path:
        return
    import torch_tpu

    cache = torch_tpu.cache_info()
    # The step clock runs from the first report (after warm-up) on.
    run = cache.get("hits", 0) + cache.get("misses", 0)
    if not clock.enabled:
        clock.enabled, clock.launch_base = True, run
    clock.totals["launches"] = run - clock.launch_base
    stats = torch_tpu.compile_stats()
    key = (cache.get("misses"), cache.get("compiles"), cache.get("disk_hits"), stats.get("compiles"))
    if key == _last_key and not force and not clock.enabled:
        return
    _last_key = key
    doc = {"pid": os.getpid(), "cache_info": cache,
           "compile_stats": {k: stats[k] for k in _COMPILE_KEYS if k in stats}, "steps": clock.totals}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


STEP_KEYS = ("steps", "wall_s", "prepare_s", "forward_s", "sample_s", "wait_s", "idle_s", "launches")


class StepClock:
    """Sums each served step's phases (module docstring); ``begin`` and
    ``end`` bracket a step, ``add`` books a phase inside it."""

    def __init__(self):
        self.totals = dict.fromkeys(STEP_KEYS, 0.0)
        self.enabled = False
        self._start = self._end = None
        self.launch_base = None
        self._phases = {}

    def begin(self) -> None:
        if not self.enabled:
            return
        self._start = time.perf_counter()
        self._phases = {}

    def add(self, phase: str, seconds: float) -> None:
        if self.enabled and self._start is not None:
            self._phases[phase] = self._phases.get(phase, 0.0) + seconds

    def spent(self, phase: str) -> float:
        """Seconds booked to phase in the current step so far."""
        return self._phases.get(phase, 0.0)

    def end(self) -> None:
        if not self.enabled or self._start is None:
            return
        now = time.perf_counter()
        t = self.totals
        t["steps"] += 1
        t["wall_s"] += now - self._start
        if self._end is not None:
            t["idle_s"] += self._start - self._end
        for phase, seconds in self._phases.items():
            t[phase] += seconds
        self._start, self._end = None, now


clock = StepClock()
