"""Where torch.compile(backend="tpu")'s first step goes, cold and warm.

Runs each workload's first compiled step (benchmarks/workloads, as run.py's
tpu_compile engine does) in fresh processes: cold (empty persistent cache
folder), then warm (a second process on the same folder). Each process
times, exclusively (a phase's time excludes the phases nested in it):

  import      import torch, torch_tpu and Dynamo (before the step)
  build       the model, optimizer and inputs on tpu (before the step)
  dynamo      Dynamo's frame tracing and guard building (convert_frame._compile)
  aot         our backend: AOTAutograd's joint graph, decompositions, partition
  graph_spec  the graph description (GraphSpec / PaddedGraphSpec)
  lowering    StableHLO lowering and the rest of building a program
  xla         XLA compiles of graph programs (cold) / disk loads (warm)
  wait        waiting at a graph's first call for its program, built in the
              background (TORCH_TPU_COMPILE_AHEAD); the background thread's
              own graph_spec / lowering / xla time is shown after the '|'
              (overlapped, not part of the sum)
  run         compiled graphs' calls, the programs' dispatch
  other       the rest of the step: Python between graphs, guards, eager ops
              (eager programs compiled or loaded: `eager progs`), the wait
  cpu s       the process's CPU time over the first step, all threads (less
              disturbed than wall time by other processes on a shared machine)

    python benchmarks/first_step_breakdown.py [--workloads mlp,gpt2] [--profile N]

--profile N prints cProfile's top N functions (cumulative) of each first step.
--ab VAR=VALUE runs every cold and warm process twice, interleaved: as is
(run "-") and with VAR=VALUE in the environment (its own cache folder), e.g.
TORCH_TPU_COMPILE_AHEAD=0, or PYTHONPATH=DIR for another torch_tpu build.
--repeat N repeats everything N times and ends with the medians.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import statistics
import threading
import time

T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = ("dynamo", "aot", "graph_spec", "lowering", "xla", "wait", "run", "other")
BACKGROUND = ("graph_spec", "lowering", "xla")


class Phases:
    """Exclusive wall time per phase, from wrapped functions that may nest;
    the main thread's in `excl`, other threads' in `background`."""

    def __init__(self):
        self.excl = collections.defaultdict(float)
        self.background = collections.defaultdict(float)
        self.local = threading.local()

    def _table(self):
        return self.excl if threading.current_thread() is threading.main_thread() else self.background

    def timed(self, phase, fn, after=None):
        def wrapper(*args, **kwargs):
            stack = self.local.__dict__.setdefault("stack", [])
            t0 = time.perf_counter()
            stack.append([phase, 0.0])
            try:
                out = fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                _, nested = stack.pop()
                self._table()[phase] += elapsed - nested
                if stack:
                    stack[-1][1] += elapsed
            if after is not None:
                after(out, args)
            return out
        wrapper.__wrapped__ = fn
        return wrapper

    def move(self, seconds, src, dst):
        """Reassigns `seconds` of `src`'s exclusive time to `dst` (this thread's)."""
        table = self._table()
        table[src] -= seconds
        table[dst] += seconds


def instrument(phases):
    import torch._dynamo.convert_frame as convert_frame
    from torch._dynamo.backends.registry import _COMPILER_FNS

    from torch_tpu.compiler import bucketed_program, buckets, compiled_graph, graph_spec
    convert_frame._compile = phases.timed("dynamo", convert_frame._compile)
    _COMPILER_FNS["tpu"] = phases.timed("aot", _COMPILER_FNS["tpu"])
    graph_spec.GraphSpec.__init__ = phases.timed("graph_spec", graph_spec.GraphSpec.__init__)
    buckets.PaddedGraphSpec.__init__ = phases.timed("graph_spec", buckets.PaddedGraphSpec.__init__)

    def xla_part(built, args):  # the program's XLA compile / disk load, inside _build
        phases.move(built[1].compile_seconds, "lowering", "xla")

    def xla_part_inline(entry, args):  # builds without _build (before compile-ahead): inside _compile
        if entry:
            phases.move(entry[0].compile_seconds, "lowering", "xla")
    cg = compiled_graph.CompiledGraph
    if hasattr(cg, "_build"):
        cg._build = phases.timed("lowering", cg._build, xla_part)
        cg._compile = phases.timed("wait", cg._compile)
    else:
        cg._compile = phases.timed("lowering", cg._compile, xla_part_inline)

    def bucket_xla(_, args):
        phases.move(args[0].exe.compile_seconds, "lowering", "xla")
    bucketed_program.BucketedProgram.__init__ = phases.timed("lowering", bucketed_program.BucketedProgram.__init__,
                                                             bucket_xla)
    compiled_graph.CompiledGraph.__call__ = phases.timed("run", compiled_graph.CompiledGraph.__call__)


def child(args):
    sys.path.insert(0, HERE)
    from engines import ENGINES
    engine = ENGINES["tpu_compile"]()
    engine.prepare(args.cache_dir)
    engine.load()
    import torch_tpu
    import_s = time.perf_counter() - T0
    phases = Phases()
    instrument(phases)
    t0 = time.perf_counter()
    w = engine.build(args.workload)
    build_s = time.perf_counter() - t0
    before = torch_tpu.cache_info()
    profiler = None
    if args.profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    top = phases.timed("other", lambda: engine.sync(w.step()))
    top()
    step_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    if profiler is not None:
        profiler.disable()
        import pstats
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
    after = torch_tpu.cache_info()
    modes_b, modes_a = before["modes"], after["modes"]
    res = {"import_s": import_s, "build_s": build_s, "first_step_s": step_s, "cpu_s": cpu_s,
           **{p: phases.excl[p] for p in PHASES},
           **{"bg_" + p: phases.background[p] for p in BACKGROUND},
           "graphs": torch_tpu.compile_stats()["graphs"],
           "graph_compiles": modes_a["graph"]["compiles"] - modes_b["graph"]["compiles"],
           "eager_compiles": (after["compiles"] - before["compiles"]) - (modes_a["graph"]["compiles"]
                                                                          - modes_b["graph"]["compiles"]),
           "disk_hits": after["disk_hits"] - before["disk_hits"],
           "disk_load_s": after["disk_load_seconds"] - before["disk_load_seconds"],
           "build_compiles": before["compiles"], "build_disk_hits": before["disk_hits"]}
    print("BREAKDOWN " + json.dumps(res), flush=True)


def run_child(workload, cache_dir, profile, env=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--workload", workload, "--cache-dir", cache_dir]
    if profile:
        cmd += ["--profile", str(profile)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd="/", env=env)
    if proc.returncode != 0 or "BREAKDOWN " not in proc.stdout:
        raise SystemExit(f"{workload}: child failed\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    if profile:
        sys.stderr.write(proc.stderr)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("BREAKDOWN "))
    res = json.loads(line[len("BREAKDOWN "):])
    res["process_s"] = time.perf_counter() - t0
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="mlp,gpt2,llama_decode,convnet")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--ab", help="VAR=VALUE: also run every process with this setting, interleaved")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    variants = [("-", None)]
    if args.ab:
        var, _, value = args.ab.partition("=")
        variants.append((args.ab, dict(os.environ, **{var: value})))
    print(f"{'workload':<13} {'cache':<5} {'run':<26} {'import':>6} {'build':>6} | {'1st step':>8} = "
          + " ".join(f"{c:>10}" for c in PHASES) + " | " + " ".join(f"{'bg ' + c:>10}" for c in BACKGROUND)
          + f" | {'graphs':>6} {'compiles':>8} {'eager progs':>11} {'disk':>4} {'cpu s':>6}")
    results = collections.defaultdict(list)
    for _, workload in [(i, w) for i in range(args.repeat) for w in args.workloads.split(",")]:
        with tempfile.TemporaryDirectory(prefix="tt_first_step_") as tmp:
            for state in ("cold", "warm"):
                for k, (label, env) in enumerate(variants):
                    r = run_child(workload, os.path.join(tmp, str(k)), args.profile, env)
                    results[f"{workload}/{state}/{label}"].append(r)
                    print(f"{workload:<13} {state:<5} {label:<26} {r['import_s']:6.2f} {r['build_s']:6.2f} | "
                          f"{r['first_step_s']:8.2f} = " + " ".join(f"{r[c]:10.3f}" for c in PHASES)
                          + " | " + " ".join(f"{r['bg_' + c]:10.3f}" for c in BACKGROUND)
                          + f" | {r['graphs']:6d} {r['graph_compiles']:8d} {r['eager_compiles']:11d} "
                          f"{r['disk_hits']:4d} {r['cpu_s']:6.2f}", flush=True)
    if args.repeat > 1:
        print(f"medians of {args.repeat} runs (load now {os.getloadavg()[0]:.2f})")
        for key, runs in results.items():
            med = {c: statistics.median(r[c] for r in runs) for c in ("first_step_s", "cpu_s") + PHASES}
            print(f"{key:<50} {med['first_step_s']:8.2f} = " + " ".join(f"{med[c]:10.3f}" for c in PHASES)
                  + f" | cpu {med['cpu_s']:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
