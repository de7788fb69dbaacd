"""python -m torch_tpu.tune SCRIPT [options] [-- SCRIPT ARGS]

Tunes the workload SCRIPT defines (make_model, make_batch and optionally
loss_fn, make_optimizer, BATCH_SIZE, LENGTHS; or make_step(device): see
torch_tpu/tune/workload.py) within --budget seconds, prints the table and
writes the settings file (--out, default tuned.json). Arguments after "--"
are the script's sys.argv[1:] in every worker.
"""
import argparse
import sys

from . import tune


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, script_args = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="python -m torch_tpu.tune", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("script", help="the workload script")
    p.add_argument("--budget", type=float, default=120.0, help="seconds of wall time (default 120)")
    p.add_argument("--knobs", default=None, help="comma-separated knobs to try (default: all)")
    p.add_argument("--allow-precision", action="store_true",
                   help="consent to trying float32 matmul precisions (they change numerics on a TPU)")
    p.add_argument("--world-size", type=int, default=None,
                   help="also DDP and FSDP2 over N devices: measured over in-process ranks, and modelled")
    p.add_argument("--steps-planned", type=int, default=0,
                   help="count compile time, spread over this many steps (default: steady step time only)")
    p.add_argument("--sample", type=float, default=1.0, help="seconds of timed steps per process (default 1)")
    p.add_argument("--out", default="tuned.json", help="the settings file to write (default tuned.json)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    try:
        result = tune(a.script, budget_s=a.budget, knobs=a.knobs.split(",") if a.knobs else None,
                      allow_precision=a.allow_precision, world_size=a.world_size, steps_planned=a.steps_planned,
                      sample_s=a.sample, out=a.out, progress=not a.quiet, script_args=script_args)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as e:
        raise SystemExit(f"error: {e}")
    print(result.table(markdown=a.markdown))
    print(f"\nsettings: {a.out} (apply with torch_tpu.tune.apply({a.out!r}) or TORCH_TPU_TUNED={a.out})")


if __name__ == "__main__":
    main()
