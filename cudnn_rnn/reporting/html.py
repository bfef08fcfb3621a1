"""matrix.html: one self-contained page (inline CSS and SVG, no script, no network)."""
from __future__ import annotations

from html import escape

from cudnn_rnn.reporting import constraints as cons, grid as C, markdown, mdhtml
from cudnn_rnn.reporting.load import is_sample_shape

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px}
td,th{border:1px solid #c9d1d9;padding:3px 6px;font-size:12px;white-space:nowrap}
th{background:#f3f5f7}
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
    sample = [r for r in records if is_sample_shape(r) and not r.get("varies")]
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
    rest = [r for r in records if not is_sample_shape(r) and not r.get("varies")]
    if not rest:
        return ""
    rows = "".join(
        f"<tr><td>{escape(r['data_type'])}/{escape(r['math_prec'])}/{escape(r['math_type'])}/"
        f"{escape(r['algo'])}</td><td>{escape(r['cell'])}</td>"
        f"<td>{r['shape']['seq_length']}x{r['shape']['layers']}x{r['shape']['hidden']}x"
        f"{r['shape']['batch']}</td>{_cell(r)}</tr>" for r in rest)
    return ("<h2>Other shapes</h2><table><tr><th>configuration</th><th>cell</th><th>TxLxHxB</th>"
            f"<th>result</th></tr>{rows}</table>")


def sweep_chart(sweep: dict) -> str:
    """Grouped bars of forward-training speed-up over FP32, one group per (cell, shape)."""
    rows, configs = sweep["rows"], [c for c in sweep["configs"] if not c.endswith("/FMA/STANDARD")]
    if not rows or not configs:
        return "<p>No timed shape sweep in this result set.</p>"
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    values = [(r["configs"].get(c) or {}).get("speedup") or 0 for r in rows for c in configs]
    top = max(values + [1.0]) * 1.1
    bar, gap, height, left = 11, 14, 220, 40
    group_w = bar * len(configs) + gap
    width = left + group_w * len(rows) + 20
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 90}" '
           f'role="img" aria-label="speed-up over FP32 across the shape sweep">']
    for tick in range(0, int(top) + 1):
        y = height - tick / top * height + 10
        svg.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick}x</text>')
    y1 = height - 1 / top * height + 10
    svg.append(f'<line x1="{left}" x2="{width - 10}" y1="{y1:.1f}" y2="{y1:.1f}" stroke="#6b7280" '
               'stroke-dasharray="4 3"/>')
    for gi, r in enumerate(rows):
        x0 = left + gi * group_w + gap / 2
        for ci, c in enumerate(configs):
            v = (r["configs"].get(c) or {}).get("speedup")
            if v is None:
                continue
            h = v / top * height
            svg.append(f'<rect x="{x0 + ci * bar:.1f}" y="{height - h + 10:.1f}" width="{bar - 1}" '
                       f'height="{h:.1f}" fill="{colours[ci % len(colours)]}"><title>'
                       f'{escape(r["cell"])} hidden {r["hidden"]} batch {r["batch"]}: {escape(c)} '
                       f'{v:.2f}x FP32</title></rect>')
        label = f'{r["cell"][:4]} {r["hidden"]}x{r["batch"]}'
        svg.append(f'<text x="{x0 + group_w / 2 - gap / 2:.1f}" y="{height + 24}" font-size="10" '
                   f'text-anchor="end" transform="rotate(-40 {x0 + group_w / 2 - gap / 2:.1f} '
                   f'{height + 24})">{escape(label)}</text>')
    svg.append("</svg>")
    legend = "".join(f'<span style="border-left:12px solid {colours[i % len(colours)]}">{escape(c)}</span>'
                     for i, c in enumerate(configs))
    return "".join(svg) + f'<div class="legend">{legend}</div>'


def legend() -> str:
    """The grid's legend, each entry in its cell's colour."""
    return '<p>Legend:</p><div class="legend">' + "".join(
        f'<span class="{cls}"><b>{escape(k.replace("`", ""))}</b>: {mdhtml.inline(v)}</span>'
        for (k, v), cls in zip(C.LEGEND, C.LEGEND_CLASS)) + "</div>"


def support_matrix(title: str, records: list) -> str:
    """The section of the grids: its heading, the coloured legend and one grid per data type."""
    return (f"<h2>{escape(title)}</h2><p>One table per data type: rows math precision x math "
            "type, columns algorithm x cell. Hover a cell for the failing call and cuDNN's "
            "reason, or the timings and error.</p>" + legend() + grids(records))


def render(result, analysis: dict, report: dict, md: str | None = None) -> str:
    """matrix.html: every section of matrix.md (``md``, rendered here when not given), the
    grids in colour with a hover text per cell, the sweep as a chart, and every other shape's
    cells."""
    if md is None:
        md = markdown.render(result, analysis, report, cons.load())
    body = []
    for title, text in mdhtml.sections(md):
        if title.startswith("The support matrix at the sample's shape"):
            body.append(support_matrix(title, result.records))
        elif title == "Why no tensor-op speed-up?":
            heading, _, rest = text.partition("\n")
            body.append(mdhtml.to_html(heading) + sweep_chart(analysis["sweep"])
                        + mdhtml.to_html(rest))
        else:
            body.append(mdhtml.to_html(text))
    body.append(other_cells(result.records))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>cuDNN RNN support matrix: {escape(result.label)}</title>
<style>{MATRIX_CSS}</style></head><body>
{chr(10).join(b for b in body if b)}
</body></html>
"""
