"""matrix.html: one self-contained page (inline CSS and SVG, no script, no network), and
the sweep's chart that matrix.md links and matrix.html carries inline (:mod:`.charts`)."""
from __future__ import annotations

from html import escape

from cudnn_rnn.reporting import charts, constraints as cons, grid as C, markdown, mdhtml

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px}
td,th{border:1px solid #c9d1d9;padding:3px 6px;font-size:12px;white-space:nowrap}
th{background:#f3f5f7}
pre{white-space:pre-wrap}
td.ok{background:#d8f3dc}td.ok-fast{background:#95d5b2}td.ok-slow{background:#e9f5db}
td.ns{background:#e5e7eb;color:#4b5563}td.bp{background:#fde2c4}td.wrong{background:#f8b4b4}
td.crash{background:#374151;color:#fff}td.skip{background:#f3f4f6;color:#6b7280}
td.other{background:#fef3c7}td.none{background:#fff}
.legend span{display:inline-block;padding:2px 8px;margin:2px;border:1px solid #c9d1d9}
.prov td:first-child{font-weight:600}
"""
# matrix.html's own: each outcome's colour on grid cells and legend entries alike
MATRIX_CSS = CSS + """
.ok{background:#d8f3dc}.ok-fast{background:#95d5b2}.ok-slow{background:#e9f5db}
.ns{background:#e5e7eb;color:#4b5563}.bp{background:#fde2c4}.wrong{background:#f8b4b4}
.crash{background:#374151;color:#fff}.desc{background:#dbeafe;color:#1e3a8a}
.other{background:#fef3c7}.none{background:#fff}
.legend span{white-space:normal;max-width:60em}code{font-size:12px}details{margin:4px 0 12px}
"""


def _cell(rec) -> str:
    if rec is None:
        return '<td class="none"></td>'
    return (f'<td class="{C.css_class(rec)}" data-id="{escape(rec["id"])}" '
            f'title="{escape(C.long(rec))}">{escape(C.short(rec))}</td>')


def grids(records: list) -> str:
    sample = C.planned(records)
    parts = []
    for dt in C.data_types(sample):
        rows, cols, index = C.grid(sample, dt)
        head = "".join(f"<th>{escape(a)} <br>{escape(c)}</th>" for a, c in cols)
        body = "".join(
            f"<tr><th>{escape(p)} / {escape(m)}</th>"
            + "".join(_cell(index.get((p, m, a, c))) for a, c in cols) + "</tr>" for p, m in rows)
        table = f"<table><tr><th>prec / math</th>{head}</tr>{body}</table>"
        refused = C.one_refusal(sample, dt)
        if refused:  # said once; the grid stays one click away, each cell with its hover text
            table = (f"<p>{mdhtml.inline(refused['text'])}</p><details><summary>the "
                     f"{refused['cells']} cells</summary>{table}</details>")
        parts.append(f"<h3>{escape(dt)}</h3>{table}")
    return "".join(parts)


def other_cells(records: list) -> str:
    """Every cell not at the sample's shape (the sweep), one row each, so none is left out."""
    rest = C.planned(records, at_sample=False)
    if not rest:
        return ""
    rows = "".join(
        f"<tr><td>{escape(r['data_type'])}/{escape(r['math_prec'])}/{escape(r['math_type'])}/"
        f"{escape(r['algo'])}</td><td>{escape(r['cell'])}</td>"
        f"<td>{r['shape']['seq_length']}x{r['shape']['layers']}x{r['shape']['hidden']}x"
        f"{r['shape']['batch']}</td>{_cell(r)}</tr>" for r in rest)
    return ("<h2>Other shapes</h2><table><tr><th>configuration</th><th>cell</th><th>TxLxHxB</th>"
            f"<th>result</th></tr>{rows}</table>")


CHART = "matrix.png"  # the sweep's chart beside matrix.md; inline SVG in matrix.html


def sweep_chart(sweep: dict) -> charts.Chart | None:
    """Forward-training speed-up over true FP32 per configuration, one group of bars per
    (cell, hidden, batch) of the shape sweep; None without a timed sweep or matplotlib."""
    rows = sweep["rows"]
    configs = [c for c in sweep["configs"] if not c.endswith("/FMA/STANDARD")]
    if not rows or not configs:
        return None
    groups = [f"{r['cell']} hidden {r['hidden']}, batch {r['batch']}" for r in rows]
    values, notes = {}, {}
    for g, r in zip(groups, rows):
        for c in configs:
            v = (r["configs"].get(c) or {}).get("speedup")
            values[(g, c)] = v
            notes[(g, c)] = f"{v:.2f}x" if v is not None else ""
    return charts.bars(
        groups, configs, values, notes=notes, ref=(1.0, "1x true FP32 (FLOAT/FLOAT/FMA/STANDARD)"),
        title="Forward-training speed-up over true FP32 (same cell and shape, same run); "
              "seqLength 20, one layer",
        xlabel="x true FP32 (forward training)",
        alt="Forward-training speed-up over true FP32 of each configuration across the shape "
            "sweep")


def chart_line(sweep: dict, chart: charts.Chart | None) -> str:
    """matrix.md's line for the chart: its image, the one line saying it was left out, or
    nothing for a result set without a timed sweep."""
    if not sweep["rows"]:
        return ""
    return chart.markdown(CHART) if chart else charts.LEFT_OUT


def legend(records: list) -> str:
    """The grids' legend (the entries for what ``records`` hold), each in its cells' colour."""
    return '<p>Legend:</p><div class="legend">' + "".join(
        f'<span class="{cls}"><b>{escape(k.replace("`", ""))}</b>: {mdhtml.inline(v)}</span>'
        for k, v, cls in C.legend(records)) + "</div>"


def support_matrix(title: str, records: list) -> str:
    """The section of the grids: its heading, the coloured legend and one grid per data type."""
    return (f"<h2>{escape(title)}</h2><p>One table per data type: rows math precision x math "
            "type, columns algorithm x cell. Hover a cell for the failing call and cuDNN's "
            "reason, or the timings and error.</p>"
            + legend(C.planned(records) + C.planned(records, at_sample=False))
            + grids(records))


def render(result, analysis: dict, report: dict, md: str | None = None,
           chart: charts.Chart | None = None) -> str:
    """matrix.html: every section of matrix.md (``md``; rendered here, with the sweep's
    chart, when not given), the grids in colour with a hover text per cell, the sweep's
    ``chart`` inline where matrix.md links it, and every other shape's cells."""
    if md is None:
        chart = sweep_chart(analysis["sweep"])
        md = markdown.render(result, analysis, report, cons.load(),
                             chart_line(analysis["sweep"], chart))
    figures = {CHART: chart.svg()} if chart else {}
    body = []
    for title, text in mdhtml.sections(md):
        if title.startswith("The support matrix at the sample's shape"):
            body.append(support_matrix(title, result.records))
        else:
            body.append(mdhtml.to_html(text, figures))
    body.append(other_cells(result.records))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>cuDNN RNN support matrix: {escape(result.label)}</title>
<style>{MATRIX_CSS}</style></head><body>
{chr(10).join(b for b in body if b)}
</body></html>
"""
