"""Counters for torch.compile(backend="tpu"): graphs, compiles, recompiles,
graphs that run eagerly and why."""
import threading

_lock = threading.Lock()
_stats = {}


def _reset():
    _stats.clear()
    _stats.update(graphs=0, compiles=0, recompiles=0, compile_seconds=0.0, xla_compile_seconds=0.0,
                  ops_compiled=0, op_counts={}, eager_graphs={}, bucketed_compiles=0, bucket_fallbacks={},
                  segmented_graphs=0, collectives=0, replicated_graphs=0, collectives_in_program=0,
                  in_program_fallbacks={})


_reset()


def record_graph(name, gm):
    with _lock:
        _stats["graphs"] += 1


def record_segments(name, segmented):
    """A graph cut at its collectives into program segments."""
    with _lock:
        _stats["segmented_graphs"] += 1
        _stats["collectives"] += segmented.collective_count


def record_replicated(name, collective_count):
    """A graph built as one program of one replica per rank, its collectives inside."""
    with _lock:
        _stats["replicated_graphs"] += 1
        _stats["collectives_in_program"] += collective_count


def _record_reason(table, name, reason, message):
    """Keeps `reason` for graph `name` in _stats[table]; warns the first time a reason is seen."""
    import warnings
    with _lock:
        first = reason not in _stats[table].values()
        _stats[table][name] = reason
    if first:
        warnings.warn(f"torch_tpu: graph {name} {message}: {reason}", stacklevel=4)


def record_in_program_fallback(name, reason):
    """A graph on in-process ranks that could not hold its collectives in
    one program and runs in segments."""
    _record_reason("in_program_fallbacks", name, reason, "runs its collectives between program segments")


def record_compile(name, seconds, xla_seconds, ops, bucketed=False):
    """`ops`: the ATen op name of every node the program was built from."""
    with _lock:
        for op in ops:
            _stats["op_counts"][op] = _stats["op_counts"].get(op, 0) + 1
        _stats["compiles"] += 1
        _stats["bucketed_compiles"] += bucketed
        _stats["compile_seconds"] += seconds
        _stats["xla_compile_seconds"] += xla_seconds
        _stats["ops_compiled"] += len(ops)


def record_recompile(name):
    with _lock:
        _stats["recompiles"] += 1


def record_eager(name, reason):
    _record_reason("eager_graphs", name, reason, "runs op by op (eagerly) on tpu")


def record_bucket_fallback(name, reason):
    _record_reason("bucket_fallbacks", name, reason, "compiles per exact shape, not per shape bucket")


def compile_stats():
    """A copy of the counters: graphs (FX graphs handed to the backend),
    compiles (programs built), recompiles (a graph compiled again for new
    input shapes), compile_seconds (lowering + XLA), xla_compile_seconds,
    ops_compiled, op_counts ({ATen op: nodes compiled into programs}),
    eager_graphs ({graph: reason} for graphs that could not become one
    program and run op by op instead), bucketed_compiles (programs
    built for a shape bucket, serving a range of sizes), bucket_fallbacks
    ({graph: reason} for symbolic-size graphs compiled per exact shape),
    segmented_graphs (graphs cut at their collectives into program
    segments, each compiled as a program), collectives (the
    `_c10d_functional` collectives, waits not counted, that run between
    segments), replicated_graphs and collectives_in_program (graphs built
    as one program of one replica per rank, and the collectives inside
    them) and in_program_fallbacks ({graph: reason} for graphs on
    in-process ranks that run in segments instead). The same as torch_tpu.stats("compile")."""
    from .._stats import stats
    return stats("compile")


def snapshot():
    """A copy of the counters (compile_stats() documents them)."""
    with _lock:
        s = dict(_stats)
        s["op_counts"] = dict(_stats["op_counts"])
        s["eager_graphs"] = dict(_stats["eager_graphs"])
        s["bucket_fallbacks"] = dict(_stats["bucket_fallbacks"])
        s["in_program_fallbacks"] = dict(_stats["in_program_fallbacks"])
        return s


def reset_compile_stats():
    with _lock:
        _reset()
