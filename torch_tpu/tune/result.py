"""What a tuning run gives back: its rows (one per candidate), the pick, the
advice, the noise, and the settings to apply."""
from . import noise, space
from .padding import advice_text


class Row:
    """One candidate: its measurements (one per fresh process), or a model's
    figures (kind "modelled"). kind: "applied" (a setting torch_tpu applies),
    "advice" (a change only the user can make), "modelled"."""

    def __init__(self, candidate, kind="applied", label=None):
        self.candidate, self.kind = dict(candidate), kind
        self.key = space.normalized(candidate)
        self.label = label or space.label(candidate)
        self.runs, self.status, self.note = [], "not run", ""
        self.modelled = None  # {"step_s", "tokens_per_s", "note"} for modelled rows

    def add(self, result):
        self.runs.append(result)
        if result["status"] == "ok":
            self.status = "ok"
        elif not self.ok_runs:
            self.status, self.note = result["status"], result.get("reason", "")

    @property
    def ok_runs(self):
        return [r for r in self.runs if r["status"] == "ok"]

    @property
    def step_s(self):
        if self.modelled:
            return self.modelled["step_s"]
        return noise.median_step(self.ok_runs) if self.ok_runs else None

    @property
    def tokens(self):
        return self.ok_runs[0]["tokens"] if self.ok_runs else None

    @property
    def tokens_per_s(self):
        if self.modelled:
            return self.modelled["tokens_per_s"]
        return self.tokens / self.step_s if self.ok_runs else None

    @property
    def peak_bytes(self):
        return max(r["peak_bytes"] for r in self.ok_runs) if self.ok_runs else None

    @property
    def compile_s(self):
        """The first process's warm-up time beyond its steady steps (tracing and
        compiling from a cold compile cache; later processes load from disk)."""
        return self.ok_runs[0]["settle_s"] if self.ok_runs else None

    @property
    def spread(self):
        return noise.spread(self.ok_runs) if self.ok_runs else None

    def deviation(self, default):
        """Largest relative difference of the first steps' check values (the
        loss, or the output's sum) from the default's; None when not comparable."""
        if not (self.ok_runs and default.ok_runs) or "batch_size" in self.candidate:
            return None
        a, b = self.ok_runs[0]["checks"], default.ok_runs[0]["checks"]
        n = min(len(a), len(b))
        if not n:
            return None
        return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a[:n], b[:n]))

    def changes_numerics(self):
        ks = space.knobs()
        return any(k == "pad" or (k in ks and ks[k].numerics) for k in self.key)

    def to_dict(self, default):
        return {"candidate": self.label, "settings": self.key, "kind": self.kind, "status": self.status,
                "note": self.note, "step_s": self.step_s, "tokens_per_s": self.tokens_per_s,
                "peak_bytes": self.peak_bytes, "compile_s": self.compile_s, "processes": len(self.ok_runs),
                "spread": self.spread, "deviation": self.deviation(default),
                "changes_numerics": self.changes_numerics(),
                "measured": self.kind != "modelled", "modelled": self.modelled}


class TuneResult:
    """rows; pick (the chosen Row); default; reason (why the pick); noise;
    settings (the knobs to apply); advice (strings); table()."""

    def __init__(self, rows, pick, default, reason, ratios, tolerance, elapsed_s, budget_s, steps_planned,
                 objective):
        self.rows, self.pick, self.default, self.reason = rows, pick, default, reason
        self.ratios, self.tolerance = list(ratios), tolerance
        self.elapsed_s, self.budget_s, self.steps_planned = elapsed_s, budget_s, steps_planned
        ok = sorted((r for r in rows if r.kind == "applied" and r.ok_runs), key=objective)
        self.noise = max((r.spread for r in ok[:2]), default=None)
        self.stable = noise.stable(self.ratios, tolerance)
        self.load = None  # (load average at the start, at the end, cores), set by the search

    @property
    def settings(self):
        """The pick's applied knobs at non-default values ({} keeps the defaults)."""
        return dict(self.pick.key)

    @property
    def speedup(self):
        if self.pick.ok_runs and self.default.ok_runs:
            return self.default.step_s / self.pick.step_s
        return None

    @property
    def advice(self):
        out = []
        for r in self.rows:
            if r.kind != "advice" or not r.ok_runs:
                continue
            # compared with the candidate it was measured on (the pick when it was run)
            key = {k: v for k, v in r.key.items() if k not in space.ADVICE}
            base = next((b for b in self.rows if b.key == key and b.ok_runs), None)
            if base is None:
                continue
            if "batch_size" in r.candidate:
                out.append(f"batch size {r.candidate['batch_size']}: {r.tokens_per_s / base.tokens_per_s:.2f}x "
                           f"the tokens/s of {base.label}, peak memory {r.peak_bytes / 2**20:.1f} MiB "
                           f"(changes the training: scale the learning rate)")
            elif "layout" in r.candidate:
                n = r.ok_runs[0]["info"]["world_size"]
                out.append(f"{r.label}: {r.tokens_per_s / base.tokens_per_s:.2f}x the tokens/s of {base.label} on "
                           f"one device at the same global batch, peak memory {r.peak_bytes / 2**20:.1f} MiB a "
                           f"device; measured over {n} in-process ranks that share this machine's cores")
            elif r.candidate.get("pad"):
                sizes = {int(k): v for k, v in r.ok_runs[0].get("padded", {}).items()}
                out.append(f"{advice_text(sizes)}: step {r.step_s / base.step_s:.2f}x {base.label}'s, "
                           f"measured on a padded copy (mask the extra logits to -inf, or ignore them)")
        return out

    def to_dict(self):
        return {"settings": self.settings, "hooks": space.hooks(self.pick.candidate), "pick": self.pick.label,
                "reason": self.reason, "speedup_over_default": self.speedup, "noise": self.noise,
                "ratio_best_two": self.ratios, "stable": self.stable, "elapsed_s": self.elapsed_s,
                "budget_s": self.budget_s, "advice": self.advice, "load": self.load,
                "rows": [r.to_dict(self.default) for r in self.rows]}

    def table(self, markdown=False):
        from .report import table
        return table(self, markdown)

    def save(self, path):
        from .settings_file import write
        write(path, self)

    def __str__(self):
        return self.table()

    def summary(self):
        lines = [f"pick: {self.pick.label} — {self.reason}"]
        if self.speedup:
            lines.append(f"  {self.speedup:.2f}x the default's speed (step time {1 / self.speedup:.2f}x)")
        if self.noise is not None:
            src = "between fresh processes and step to step" if any(
                len(r.ok_runs) > 1 for r in self.rows) else "step to step only (no repeat fitted the budget)"
            lines.append(f"noise: ±{100 * self.noise:.1f}%, {src}; ratio of the best two over repeat rounds: "
                         f"{', '.join(f'{x:.3f}' for x in self.ratios) or 'not repeated'}"
                         f"{' (stable)' if self.stable else ''}")
        lines.append(f"time: {self.elapsed_s:.0f} s of a {self.budget_s:.0f} s budget")
        if self.load:
            start, end, cores = self.load
            busy = ""
            if max(start, end) > cores:
                busy = " — busier than its cores: other processes' load is in these figures"
            lines.append(f"machine: load average {start:.1f} at the start, {end:.1f} at the end, {cores} cores{busy}")
        lines.extend(f"advice: {a}" for a in self.advice)
        return "\n".join(lines)
