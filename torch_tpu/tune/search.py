"""The search: which candidates to measure, in which order, within the budget.

1. The default (fused eager, the user's batch) — it also says what the
   workload allows (training or not, batch knob, lengths, sizes to pad).
2. The execution modes: strict eager, torch.compile, TrainStep (training).
3. On the best so far: shape buckets off (workloads with LENGTHS, compiled
   modes), matmul precisions (only with consent), on a TPU plugin the
   Pallas kernels' block sizes, each registered knob's values — one knob at
   a time (coordinate search, not the whole product: benchmarks/
   tune_check.py measures the whole product to check the pick).
4. One repeat round of the best two (fresh processes).
5. Advice on the pick: larger batches up to the memory limit, a padded copy.
6. More repeat rounds of the best two until their ratio is stable.
7. While the fastest beats the default by no more than the noise
   (noise.comparison), paired rounds of the two (fresh processes,
   alternating order) until it does, or the default ranks first, or
   `_SETTLE_ROUNDS` rounds, or the budget is spent.
With a world size N: DDP and FSDP2 over N in-process ranks at the same
global batch, measured (advice: a layout changes the program), and the same
layouts modelled for a TPU slice (layout.py), which cost no run.

Budget: a measurement starts only if the slowest one so far would still end
before the deadline, and each worker is stopped at the deadline.
The pick is the applied candidate with the lowest objective (step time, plus
the compile time spread over `steps_planned` steps when given); it replaces
the default only if it beats it by more than the measured noise.
"""
import os
import shutil
import tempfile
import time

from . import layout, noise, runner, space
from .progress import Progress
from .result import Row, TuneResult

_MARGIN_S = 0.5  # kept for writing the result after the last worker
_SETTLE_ROUNDS = 12


class _Search:
    def __init__(self, source, budget_s, knobs, allow_precision, world_size, steps_planned, sample_s,
                 tolerance, max_repeats, max_batch_factor, show_progress):
        self.source, self.knobs, self.allow_precision = source, knobs, allow_precision
        self.world_size, self.steps_planned, self.sample_s = world_size, steps_planned, sample_s
        self.tolerance, self.max_repeats, self.max_batch_factor = tolerance, max_repeats, max_batch_factor
        self.deadline = time.monotonic() + budget_s
        self.budget_s = budget_s
        self.progress = Progress(budget_s, show_progress)
        self.rows, self.process_times = [], []
        self.cache_dir = tempfile.mkdtemp(prefix="torch_tpu_tune_")
        self.ratios = []
        self.load_at_start = os.getloadavg()[0]

    # ---- measuring ---------------------------------------------------------------
    def remaining(self):
        return self.deadline - time.monotonic() - _MARGIN_S

    def fits(self):
        if not self.process_times:
            return self.remaining() > 0
        return max(self.process_times) < self.remaining()

    def measure(self, row):
        if not self.fits():
            if not row.runs:
                row.status, row.note = "skipped", "not measured: the budget would run out"
            return False
        self.progress.start(row.label)
        spec = {"workload": self.source, "candidate": row.candidate, "hooks": space.hooks(row.candidate),
                "sample_s": self.sample_s}
        r = runner.run(spec, self.remaining(), self.cache_dir)
        self.process_times.append(r["process_s"])
        self.progress.done(row.label, r)
        row.add(r)
        return r["status"] == "ok"

    def add(self, candidate, kind="applied"):
        key = space.normalized(candidate)
        for row in self.rows:
            if row.key == key:
                return row
        row = Row(candidate, kind)
        self.rows.append(row)
        self.measure(row)
        return row

    # ---- choosing ----------------------------------------------------------------
    def objective(self, row):
        s = noise.median_step(row.ok_runs)
        if self.steps_planned:
            s += row.compile_s / self.steps_planned
        return s

    def ranked(self):
        ok = [r for r in self.rows if r.kind == "applied" and r.ok_runs]
        return sorted(ok, key=self.objective)

    def repeat_round(self):
        best = self.ranked()[:2]
        if len(best) < 2:
            return False
        for row in (best[1], best[0]) if len(self.ratios) % 2 else best:
            if not self.measure(row):
                return False
        best = self.ranked()[:2]
        self.ratios.append(self.objective(best[1]) / self.objective(best[0]))
        return True

    # ---- the plan ----------------------------------------------------------------
    def run(self):
        default = self.add(space.default_candidate())
        if not default.ok_runs:
            if default.status == "timeout" or default.status == "skipped":
                return self.finish(default)
            raise RuntimeError(f"torch_tpu.tune: the workload fails in its default setting: {default.note}\n"
                               f"{default.runs[-1].get('stderr_tail', '') if default.runs else ''}")
        info = default.ok_runs[0]["info"]
        if "mode" in self.knobs:
            for mode in space.MODES[1:]:
                if mode != "trainstep" or info["training"]:
                    self.add({"mode": mode})
        best = self.ranked()[0].candidate
        if "shape_buckets" in self.knobs and info.get("lengths") and best.get("mode") in ("compile", "trainstep"):
            self.add({**best, "shape_buckets": "off"})
        if "matmul_precision" in self.knobs and self.allow_precision:
            for p in space.PRECISIONS[1:]:
                self.add({**best, "matmul_precision": p})
        for name, knob in space.knobs().items():
            if knob.platform is not None and knob.platform != info.get("plugin"):
                continue
            if name in self.knobs and knob.apply and (self.allow_precision or not knob.consent):
                for v in knob.values[1:]:
                    self.add({**best, name: v})
        self.repeat_round()
        pick = self.ranked()[0]
        self.advice(pick, info)
        while len(self.ratios) < self.max_repeats and not noise.stable(self.ratios, self.tolerance):
            if not self.repeat_round():
                break
        self.settle_against(default)
        if self.world_size:
            self.measure_layouts(info)
            self.rows.extend(layout.rows(self.ranked()[0], self.world_size))
        return self.finish(default)

    def gain_over(self, default, row):
        """(gain of row over the default as a fraction, the noise it must exceed)."""
        gain = self.objective(default) / self.objective(row) - 1
        return gain, noise.comparison(default.ok_runs, row.ok_runs)

    def settle_against(self, default):
        """Paired rounds of the default and the fastest while the gain is within the noise."""
        for r in range(_SETTLE_ROUNDS):
            ranked = self.ranked()
            if not ranked or ranked[0] is default or not default.ok_runs:
                return
            fastest = ranked[0]
            gain, n = self.gain_over(default, fastest)
            if gain > n:
                return
            for row in (default, fastest) if r % 2 == 0 else (fastest, default):
                if not self.measure(row):
                    return

    def measure_layouts(self, info):
        """DDP and FSDP2 over world_size in-process ranks, which run strict
        eager (launch_in_process: the ranks are threads of one process, whose
        one fused cluster their interleaved ops would cut differently every
        step)."""
        n = self.world_size
        if "layout" not in self.knobs or n < 2 or not info["training"] or info["form"] != "model":
            return
        if info["batch_size"] % n:
            return
        for kind in ("ddp", "fsdp"):
            self.add({"layout": f"{kind}{n}"}, kind="advice")

    def advice(self, pick, info):
        base = {k: v for k, v in pick.candidate.items()}
        run0 = pick.ok_runs[0]
        if "batch_size" in self.knobs and info["form"] == "model":
            limit = run0.get("memory_limit_bytes")
            bs0 = info["batch_size"]
            factor = 2
            while factor <= self.max_batch_factor:
                if limit and run0["peak_bytes"] * factor > 0.9 * limit:
                    break  # a linear upper bound of the peak: activations grow with the batch, weights do not
                row = self.add({**base, "batch_size": bs0 * factor}, kind="advice")
                if not row.ok_runs:
                    break
                factor *= 2
        if "pad" in self.knobs and run0.get("pad_sizes"):
            self.add({**base, "pad": True}, kind="advice")

    def finish(self, default):
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        ranked = self.ranked()
        pick, reason = default, "the default: nothing else was measured"
        if ranked:
            pick = ranked[0]
            reason = "the fastest measured"
            if pick is not default and default.ok_runs:
                gain, n = self.gain_over(default, pick)
                if gain <= n:
                    pick, reason = default, (f"the default: the fastest ({ranked[0].label}) beat it by "
                                             f"{100 * gain:.1f}%, within the noise ({100 * n:.1f}%)")
        result = TuneResult(self.rows, pick, default, reason, self.ratios, self.tolerance,
                            elapsed_s=self.progress.elapsed(), budget_s=self.budget_s,
                            steps_planned=self.steps_planned, objective=self.objective)
        result.load = (self.load_at_start, os.getloadavg()[0], os.cpu_count())
        return result


def search(source, budget_s, knobs, allow_precision=False, world_size=None, steps_planned=0, sample_s=1.0,
           tolerance=0.02, max_repeats=4, max_batch_factor=4, progress=True):
    s = _Search(source, budget_s, knobs, allow_precision, world_size, steps_planned, sample_s, tolerance,
                max_repeats, max_batch_factor, progress)
    try:
        return s.run()
    finally:
        shutil.rmtree(s.cache_dir, ignore_errors=True)
