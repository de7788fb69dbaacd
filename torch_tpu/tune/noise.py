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
The ratio between the best two is stable when its last two estimates (after
successive repeat rounds) differ by less than `tolerance` of their value.
"""
import statistics


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


def stable(ratios, tolerance):
    return len(ratios) >= 2 and abs(ratios[-1] - ratios[-2]) <= tolerance * ratios[-1]
