"""Noise and repeats: how far apart two measurements of the same candidate
are, and when the ratio between the best two candidates is stable.

A candidate's step time is the median over its processes of each one's step
time (the lower quartile of its timed steps, worker.py).
Two kinds of spread are stated:
  within   the interquartile range of one process's step times over their
           median (the step-to-step jitter);
  between  (max - min) / median of the processes' step times (what a fresh
           process changes: layout, caches, the machine's load), once a
           candidate ran in two processes or more.
Whether one candidate beats another is judged against `comparison`: once
each ran in two processes or more, 1.645 standard errors of the difference
of their medians over processes (a one-sided 95% bound; the standard error
of a median is 1.2533 sd / sqrt(n)), so more processes narrow it; before
that, the larger step-to-step spread (a single process says nothing about
what a fresh one changes).
The ratio between the best two is stable when its last two estimates (after
successive repeat rounds) differ by less than `tolerance` of their value.
"""
import math
import statistics

_Z_ONE_SIDED_95 = 1.645


def median_step(runs):
    return statistics.median(r["step_s"] for r in runs)


def within(run):
    t = sorted(run["step_times"])
    if len(t) < 4:
        return 0.0
    q1, q3 = t[len(t) // 4], t[(3 * len(t)) // 4]
    return (q3 - q1) / statistics.median(t)


def between(runs):
    if len(runs) < 2:
        return None
    m = [r["step_s"] for r in runs]
    return (max(m) - min(m)) / statistics.median(m)


def spread(runs):
    """The larger of the two spreads, as a fraction of the step time."""
    b = between(runs)
    w = statistics.median(within(r) for r in runs)
    return max(w, b if b is not None else 0.0)


def comparison(runs_a, runs_b):
    """The noise that a difference between two candidates' step times must
    exceed to count, as a fraction of the step time."""
    def standard_error(runs):
        m = [r["step_s"] for r in runs]
        return 1.2533 * statistics.stdev(m) / statistics.median(m) / math.sqrt(len(m))

    if len(runs_a) < 2 or len(runs_b) < 2:
        return max(statistics.median(within(r) for r in runs) for runs in (runs_a, runs_b))
    return _Z_ONE_SIDED_95 * math.hypot(standard_error(runs_a), standard_error(runs_b))


def stable(ratios, tolerance):
    return len(ratios) >= 2 and abs(ratios[-1] - ratios[-2]) <= tolerance * ratios[-1]
