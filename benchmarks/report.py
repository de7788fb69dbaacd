"""Tables, ratios, the issue's targets, and the PNG chart for a run.py results
document ({"results": {workload: {engine: result}}, ...})."""

REFERENCES = ("jax_jit", "tpu_eager")  # ratio columns: engine step time / reference step time


def _ok(r):
    return r is not None and r.get("status") == "ok"


def ratio(results, engine, ref, key="step_s"):
    a, b = results.get(engine), results.get(ref)
    if _ok(a) and _ok(b) and a.get(key) and b.get(key):
        return a[key] / b[key]
    return None


def _fmt(v, scale=1.0, digits=2, suffix=""):
    return "-" if v is None else f"{v * scale:.{digits}f}{suffix}"


def print_tables(doc):
    m = doc["machine"]
    print(f"\n{doc['date']}  {m['cpu']}, {m['cores']} cores, load {m['load_avg_at_start'][0]:.1f} at start; "
          f"{doc['args']['steps']} timed steps after {doc['args']['warmup']} warmup")
    print("step: median ms; x jax / x eager: step time over jax_jit's / tpu_eager's (lower is faster);\n"
          "first: time to first step, cold and warm cache (s); memory: MB (t = torch.tpu.max_memory_allocated,\n"
          "r = peak process RSS growth over the run); check: loss (decode: logits sum) after the first step")
    for workload, results in doc["results"].items():
        print(f"\n== {workload}")
        print(f"{'engine':15s} {'step ms':>9s} {'x jax':>7s} {'x eager':>8s} {'first cold':>11s} {'first warm':>11s} "
              f"{'memory':>9s} {'check':>10s}")
        for engine, r in results.items():
            if not _ok(r):
                print(f"{engine:15s} {r['status'].upper()}: {r.get('reason', '')}")
                continue
            kind = "t" if r["memory_kind"].startswith("torch.tpu") else "r"
            print(f"{engine:15s} {_fmt(r['step_s'], 1e3):>9s} {_fmt(ratio(results, engine, 'jax_jit'), suffix='x'):>7s} "
                  f"{_fmt(ratio(results, engine, 'tpu_eager'), suffix='x'):>8s} {_fmt(r['first_step_s']):>11s} "
                  f"{_fmt(r.get('first_step_warm_s')):>11s} {_fmt(r['memory_bytes'], 1e-6, 1) + kind:>9s} "
                  f"{r['check_first']:>10.5g}")
            if r.get("fallback_ops"):
                print(f"{'':15s} ran on the CPU (fallback): {r['fallback_ops']}")
            if r.get("warm_status"):
                print(f"{'':15s} warm run {r['warm_status']}")
    print_targets(doc)


def print_targets(doc):
    """The issue's targets, as ratios from this run; '-' where a side is missing."""
    print("\n== targets (issue 4)")
    rows = []
    for w, res in doc["results"].items():
        rows.append((f"{w}: tpu_compile step <= 1.2x jax_jit", ratio(res, "tpu_compile", "jax_jit"), 1.2))
        rows.append((f"{w}: tpu_compile step < torch_xla", ratio(res, "tpu_compile", "torch_xla"), 1.0))
        rows.append((f"{w}: tpu_compile first step <= 0.5x torch_xla",
                     ratio(res, "tpu_compile", "torch_xla", "first_step_s"), 0.5))
        if w in ("mlp", "gpt2"):  # fused eager at least 1.5x faster than op-by-op eager
            rows.append((f"{w}: tpu_fused step <= 1/1.5 of tpu_eager", ratio(res, "tpu_fused", "tpu_eager"), 1 / 1.5))
        else:  # and never slower than it
            rows.append((f"{w}: tpu_fused step <= tpu_eager", ratio(res, "tpu_fused", "tpu_eager"), 1.0))
    for name, value, limit in rows:
        verdict = "n/a (a side is missing)" if value is None else ("met" if value <= limit else "MISSED")
        print(f"{name:60s} {_fmt(value, suffix='x'):>8s}  {verdict}")


def chart(doc, path):
    """Writes the PNG; returns None, or the reason it could not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"matplotlib does not import: {e}"
    workloads = list(doc["results"])
    engines = []
    for res in doc["results"].values():
        engines += [e for e in res if e not in engines]
    panels = (("steady step (ms, log)", "step_s", 1e3, True), ("first step, cold (s, log)", "first_step_s", 1, True),
              ("first step, warm (s, log)", "first_step_warm_s", 1, True), ("peak memory (MB): torch_tpu engines device allocations, others process RSS growth", "memory_bytes", 1e-6, False))
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 2.2 * len(workloads) * len(engines) / 4), 13))
    width = 0.8 / max(1, len(engines))
    for ax, (title, key, scale, log) in zip(axes, panels):
        for i, e in enumerate(engines):
            xs, ys, missing = [], [], []
            for j, w in enumerate(workloads):
                r = doc["results"][w].get(e)
                v = r.get(key) if _ok(r) else None
                if v:
                    xs.append(j + i * width)
                    ys.append(v * scale)
                else:
                    missing.append(j + i * width)
            ax.bar(xs, ys, width, label=e, color=plt.cm.tab10(i % 10))
            for x in missing:  # a missing engine is shown, not dropped
                ax.text(x, 0.02, "missing", rotation=90, transform=ax.get_xaxis_transform(), fontsize=7,
                        ha="center", va="bottom", color="gray")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))], workloads)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
    axes[0].legend(ncol=4, fontsize=8)
    m = doc["machine"]
    fig.suptitle(f"torch_tpu benchmarks, {doc['date']}, {m['cpu']} ({m['cores']} cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None
