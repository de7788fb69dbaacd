"""The report table: candidate, step time, tokens/s, peak memory, compile
time, numerics change, measured or modelled; the pick marked with "*".

Step time is the median over fresh processes of each process's median step,
± its spread (noise.spread). Numerics: the largest relative change of the
first steps' losses from the default's; "(flag)" marks a knob that may
change results (precision, padding) whatever this plugin measured.
"""

_LEGEND = ("numerics: largest relative change of the first steps' losses from the default's; "
           "(flag): a knob that may change numerics (precision, padding)")
_HEAD = ("candidate", "step ms", "tokens/s", "peak MiB", "compile s", "numerics", "source")


def _cells(row, result):
    if row.kind == "modelled":
        m = row.modelled
        return (row.label, f"{m['step_s'] * 1e3:.2f}", f"{m['tokens_per_s']:,.0f}", "", "", "", "modelled")
    mark = "* " if row is result.pick else "  "
    if not row.ok_runs:
        return (mark + row.label, row.status, "", "", "", "", row.note[:60])
    dev = row.deviation(result.default)
    if "batch_size" in row.candidate:
        numerics = "other batch"
    elif dev is None:
        numerics = ""
    else:
        numerics = "0" if dev == 0 else f"{dev:.1e}"
        if row.changes_numerics():
            numerics += " (flag)"
    n = len(row.ok_runs)
    source = f"measured x{n}" + (" (advice)" if row.kind == "advice" else "")
    return (mark + row.label, f"{row.step_s * 1e3:.2f} ±{100 * row.spread:.0f}%", f"{row.tokens_per_s:,.0f}",
            f"{row.peak_bytes / 2**20:.1f}", f"{row.compile_s:.2f}", numerics, source)


def table(result, markdown=False):
    rows = [_cells(r, result) for r in result.rows]
    if markdown:
        lines = ["| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
        lines += ["| " + " | ".join(c.strip() for c in cells) + " |" for cells in rows]
        return "\n".join(lines) + "\n\n" + _LEGEND + "\n" + result.summary()
    widths = [max(len(h), *(len(c[i]) for c in rows)) for i, h in enumerate(_HEAD)]

    def fmt(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(_HEAD), "-" * (sum(widths) + 2 * (len(widths) - 1))] + [fmt(c) for c in rows]
    return "\n".join(lines) + "\n\n" + _LEGEND + "\n" + result.summary()
