"""matrix.html: one self-contained page (inline CSS and SVG, no script, no network)."""
from __future__ import annotations

from html import escape

from cudnn_rnn.reporting import grid as C
from cudnn_rnn.reporting.axes import cause_text, outcomes_text
from cudnn_rnn.reporting.load import is_sample_shape
from cudnn_rnn.reporting.markdown import PROVENANCE_KEYS

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
        head = "".join(f"<th>{escape(a)}<br>{escape(c)}</th>" for a, c in cols)
        body = "".join(
            f"<tr><th>{escape(p)} / {escape(m)}</th>"
            + "".join(_cell(index.get((p, m, a, c))) for a, c in cols) + "</tr>" for p, m in rows)
        parts.append(f"<h3>{escape(dt)}</h3><table><tr><th>prec / math</th>{head}</tr>{body}</table>")
    return "".join(parts)


def product_tables(rows: list, wrong_groups: list) -> str:
    """Every axis value across a product run, and the wrong results (:mod:`.product`)."""
    out = ""
    if rows:
        body = "".join(
            f"<tr><td>{escape(r['axis'])}</td><td>{escape(r['value'])}</td><td>{r['cells']}</td>"
            f"<td>{escape(outcomes_text(r['outcomes']))}</td><td>"
            + "<br>".join(escape(f"{cause_text(c)}: {c['count']}") for c in r["causes"])
            + "</td></tr>" for r in rows)
        out += ("<h2>Every axis value across the run</h2><table><tr><th>axis</th><th>value</th>"
                f"<th>cells</th><th>outcomes</th><th>most common causes</th></tr>{body}</table>")
    if wrong_groups:
        body = "".join(
            f"<tr><td>{escape(g['configuration'])}</td><td>{escape(g['cell'])}</td>"
            f"<td>{escape(g['direction'])}</td><td>{g['count']}</td><td>{escape(g['outside'])}</td>"
            f"<td>{escape(', '.join(f'{k} {v:.1e}' for k, v in sorted(g['largest_errors'].items())))}"
            f"</td><td><code>{escape(g['example'])}</code></td></tr>" for g in wrong_groups)
        out += ("<h2>Wrong results</h2><p>Every call returned SUCCESS, but the numbers did not "
                "match the float64 reference within the stated tolerance.</p><table><tr>"
                "<th>configuration</th><th>cell</th><th>direction</th><th>cells</th>"
                f"<th>outside tolerance</th><th>largest errors</th><th>example</th></tr>{body}"
                "</table>")
    return out


def axes_table(rows: list) -> str:
    """Every other axis, one at a time (:mod:`.axes`): what each value broke, and why."""
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{escape(r['axis'])}</td><td>{escape(r['value'])}</td><td>{r['variants']}</td>"
        f"<td>{escape(outcomes_text(r['outcomes']))}</td>"
        f"<td>{r['broken_count']}</td><td>{len(r['fixed'])}</td><td>"
        + "<br>".join(escape(f"{cause_text(g)}: {g['count']} ("
                             + ", ".join(f"{a} {n}" for a, n in sorted(g['by_algo'].items()))
                             + ")") for g in r["broken"])
        + "</td></tr>" for r in rows)
    return ("<h2>Every other axis, one at a time</h2><p>Each combination that got past "
            "cudnnSetRNNDescriptor_v8, with one other axis changed. Broke: the combination worked "
            "and the variant did not; fixed: the reverse (only a combination refused later, or "
            "wrong, can show it).</p><table><tr><th>axis</th><th>value</th>"
            "<th>variants</th><th>outcomes</th><th>broke</th><th>fixed</th><th>why (count by "
            f"algorithm)</th></tr>{body}</table>")


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


def render(result, analysis: dict, report: dict) -> str:
    prov = result.provenance
    prov_rows = "".join(f"<tr><td>{escape(label)}</td><td>{escape(str(prov[k]))}</td></tr>"
                        for k, label in PROVENANCE_KEYS if prov.get(k))
    prov_rows += (f"<tr><td>report</td><td>{escape(report['command'])} @ {escape(report['commit'])}"
                  f", {escape(report['date'])}</td></tr>")
    counts = ", ".join(f"{escape(k)} {v}" for k, v in analysis["counts"].items())
    legend = "".join(f'<span class="{cls}" style="background:inherit"><b>{escape(k.replace("`", ""))}</b> '
                     f'{escape(v)}</span>' for (k, v), cls in zip(C.LEGEND, ["ok"] * len(C.LEGEND)))
    a = analysis["int8"]
    seed = a.get("seed_cell") or {}
    alt = a.get("alternative") or {}
    int8 = (f"<p><b>INT8:</b> {a['ran']} of {a['cells']} INT8 cells ran. The seed's configuration "
            f"stops at <code>{escape(str(seed.get('failed_call')))}</code> with "
            f"<code>CUDNN_STATUS_{escape(str(seed.get('status')))}</code>"
            + (f" ({escape(seed['reason'])})" if seed.get("reason") else " (cuDNN logs no reason)")
            + ".</p>")
    if alt:
        speedup = "" if alt["speedup"] is None else f"{alt['speedup']:.2f}x FP32, "
        int8 += (f"<p>Fastest verified alternative: <code>{escape(alt['config'])}</code>, "
                 f"{speedup}max error {alt['max_error']:.1e}.</p>")
    findings = "".join(f"<li>{escape(f)}</li>" for f in analysis["sweep"]["findings"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>cuDNN RNN support matrix: {escape(result.label)}</title>
<style>{CSS}</style></head><body>
<h1>cuDNN RNN support matrix: {escape(result.label)}</h1>
<p>{len(result.records)} cells. Outcomes: {counts}. Hover a cell for the failing call and
cuDNN's reason, or the timings and error.</p>
<table class="prov">{prov_rows}</table>
<h2>Can this RNN run in INT8?</h2>{int8}
<h2>Speed-up over FP32 across the shape sweep (forward training)</h2>
{sweep_chart(analysis["sweep"])}
<ul>{findings}</ul>
<h2>The support matrix at 20 2 512 64</h2><div class="legend">{legend}</div>
{grids(result.records)}
{axes_table(analysis["axes"])}
{product_tables(analysis["product"], analysis["wrong"])}
{other_cells(result.records)}
</body></html>
"""
