"""torch_tpu's program counters of a serving process, for benchmarks.

With ``TORCH_TPU_VLLM_COUNTERS=<file>`` in the environment, the tpu worker
writes ``{"cache_info": torch_tpu.cache_info(), "compile_stats": {...}}`` as
JSON to that file after every step whose counters changed (and after warm-up),
replacing the file atomically, so another process (benchmarks/serving.py) can
read how many programs the engine compiled without an endpoint. Unset (the
default), nothing is written and each step pays one environment lookup.
"""

import json
import os

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
    stats = torch_tpu.compile_stats()
    key = (cache.get("misses"), cache.get("compiles"), cache.get("disk_hits"), stats.get("compiles"))
    if key == _last_key and not force:
        return
    _last_key = key
    doc = {"pid": os.getpid(), "cache_info": cache,
           "compile_stats": {k: stats[k] for k in _COMPILE_KEYS if k in stats}}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)
