"""One entry point for every counter torch_tpu keeps: ``torch_tpu.stats()``.

Sections (``stats(section)`` returns one, ``stats()`` all of them):

- ``programs``: the in-memory program cache, shared by every mode and
  bounded by TORCH_TPU_PROGRAM_CACHE_ENTRIES (least recently used evicted
  first): hits, misses, entries, evictions; compiles and compile_seconds
  count XLA compilations. "modes" holds the same counters per mode: "eager"
  (one op), "fused" (a fused eager cluster), "graph" (a torch.compile
  graph), "collective" (a program over several devices); the top-level ones
  are their sums. donated counts input buffers programs updated in place
  (buffer donation), donation_copies those copied because another tensor
  still held the buffer.
- ``persistent_cache``: the compile cache on disk, this process's counters
  (hits: programs loaded instead of compiled; misses; rejected: corrupt or
  mismatched entries, ignored and replaced; writes, write_errors, evictions,
  load_seconds, store_seconds) and the folder's current bytes and entries.
  Zeros before the runtime starts.
- ``shared_cache``: the second tier at TORCH_TPU_SHARED_CACHE_DIR, the same
  fields, or None when it is off (asking starts the runtime).
- ``fused``: fused eager mode: ops recorded, clusters run, cluster programs
  compiled and reused, pending ops, and why clusters were cut.
- ``fallbacks``: {op name: calls} for ops that ran on the CPU because no rule
  lowered them.
- ``compile``: torch.compile(backend="tpu"): graphs, compiles, recompiles,
  graphs run eagerly and why (torch_tpu.compiler.stats).

The older calls (``cache_info()``, ``fused_stats()``, ``fallback_ops()``,
``shared_cache_info()``, ``compile_stats()``, ``torch.tpu._get_cache_stats()``)
read their sections from here.
"""
from . import _C

SECTIONS = ("programs", "persistent_cache", "shared_cache", "fused", "fallbacks", "compile")


def stats(section=None):
    """The counters of one section, or {section: counters} for all."""
    if section is None:
        return {name: stats(name) for name in SECTIONS}
    if section not in SECTIONS:
        raise ValueError(f"torch_tpu.stats: no section {section!r}; sections: {', '.join(SECTIONS)}")
    if section == "compile":
        from .compiler.stats import snapshot
        return snapshot()
    value = _C._stats(section)
    return dict(value) if isinstance(value, dict) else value
