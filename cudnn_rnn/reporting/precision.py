"""precision.md and precision.html: the precision table of one model, from its JSON.

The JSON (written by ``python -m cudnn_rnn.precision``) holds the job's records, the
summary (:mod:`cudnn_rnn.charlm.summary`: which rows, targets, the answer) and provenance;
this module only renders it: ``precision[-NAME].md``, its chart ``.png`` beside it and the
``.html`` page, self-contained (inline CSS, the chart as inline SVG), by :func:`write`.
"""
from __future__ import annotations

import re
from html import escape
from pathlib import Path

from tabulate import tabulate

from cudnn_rnn.reporting import charts
from cudnn_rnn.reporting.files import write_files
from cudnn_rnn.reporting.html import CSS
from cudnn_rnn.reporting.markdown import PROVENANCE_KEYS, figure

NAMES = {"fp32": "FP32 (true, FMA)", "tf32": "TF32 (FLOAT, tensor ops)", "fp16": "FP16",
         "bf16": "BF16",
         "int8": "INT8", "fp8": "FP8 E4M3"}


ENGINE_NOTES = {"cuBLASLt": " (engine)", "persistent": " (persistent)"}


def _precision(r: dict) -> str:
    name = NAMES.get(r["family"], r["family"])
    if r["engine"] != "cuDNN" and r.get("calibration"):
        return f"{name} {r['parts']}"
    return name + ENGINE_NOTES.get(r["engine"], "")


def _config(r: dict) -> str:
    return r["label"] + (f", {r['calibration']} calibration" if r.get("calibration") else "")


def _ms(r: dict) -> str:
    """A row's median ms per batch with its interquartile range where the row has one."""
    lo_hi = r.get("spread")
    return figure(r["ms"], ".4f") + (f" ({lo_hi[0]:.4f}-{lo_hi[1]:.4f})"
                                     if lo_hi and r.get("ms") is not None else "")


def table_rows(doc: dict) -> tuple[list, list]:
    """(headers, rows) of the precision table as the markdown prints it."""
    s, ref = doc["summary"], doc["result"]["reference"]
    task = s["task"]
    if task:
        headers = ["precision", "configuration", "ms/batch (IQR)", "timed as", "µs/sequence",
                   "x FP32", "bits/char", "Δ bits/char", "top-1", "agrees with FP32",
                   "max |Δ logit|"]
        rows = [["float64 reference", "cudnn_rnn.check.reference (numpy/cupy)", "", "", "",
                 "", figure(ref.get("bpc"), ".4f"), "", figure(ref.get("top1"), ".4f"),
                 figure(ref.get("agreement"), ".4%"), figure(ref.get("max_dlogit"), ".2e")]]
    else:
        headers = ["precision", "configuration", "ms/batch (IQR)", "timed as", "µs/sequence",
                   "x FP32", "error vs float64", "error vs FP32", "max |Δ output|"]
        rows = []
    for r in s["rows"]:
        head = [_precision(r), _config(r), _ms(r), r["basis"] or "",
                figure(r["us_per_sequence"], ".2f"), figure(r["speedup_fp32"], ".2f")]
        if task:
            rows.append(head + [figure(r.get("bpc"), ".4f"), figure(r.get("dbpc_pct"), "+.4f") + " %"
                                if r.get("dbpc_pct") is not None else "",
                                figure(r.get("top1"), ".4f"), figure(r.get("agreement"), ".4%"),
                                figure(r.get("max_dlogit"), ".3f")])
        else:
            rows.append(head + [figure(r.get("error_fp64"), ".2e"), figure(r.get("error_vs_fp32"), ".2e"),
                                figure(r.get("max_doutput"), ".3e")])
    return headers, rows


def calibration_rows(doc: dict) -> tuple[list, list]:
    """Every calibration method per 8-bit format and part: Δ bits/char (or error vs FP32)."""
    s = doc["summary"]
    methods = sorted({m for cal in s["calibration"].values() for m in cal},
                     key=lambda m: doc["result"]["methods"].index(m))
    key = "dbpc_pct" if s["task"] else "error_vs_fp32"
    rows = []
    for part, cal in s["calibration"].items():
        best = min((r[key] for r in cal.values() if r.get(key) is not None), default=None)
        rows.append([part] + [("**" if cal[m].get(key) == best else "") +
                              (figure(cal[m].get(key), "+.3f" if s["task"] else ".2e"))
                              + ("**" if cal[m].get(key) == best else "")
                              if m in cal else "not verified" for m in methods])
    return ["format/part"] + methods, rows


def answer_text(doc: dict) -> str:
    """The seeds' question answered in words for this model, GPU and cuDNN."""
    s, prov = doc["summary"], doc["provenance"]
    rows = {r["id"]: r for r in s["rows"]}
    where = f"On {prov.get('gpu')} with cuDNN {prov.get('cudnn_version')}, for {doc['result']['source']['name']}"
    a = s.get("answer")
    if not a:
        return where + ": no configuration verified, so there is nothing to deploy."
    fastest = rows[a["fastest"]]
    if not s["task"]:
        return (f"{where}: the fastest verified configuration is {_precision(fastest)} "
                f"({_config(fastest)}), {figure(fastest['speedup_fp32'], '.2f')}x true FP32, "
                f"its outputs {figure(fastest.get('error_vs_fp32'), '.1e')} (relative) from FP32's.")
    deploy = rows.get(a["deploy"]) if a["deploy"] else None
    text = [where + ":"]
    if deploy:
        text.append(f"deploy {_precision(deploy)} ({_config(deploy)}): "
                    f"{figure(deploy['ms'], '.3f')} ms per batch of {doc['result']['source']['shape']['batch']}, "
                    f"{figure(deploy['speedup_fp32'], '.2f')}x true FP32, at "
                    f"{figure(deploy.get('dbpc_pct'), '+.4f')} % bits per character "
                    f"({figure(deploy.get('agreement'), '.2%')} of its top-1 predictions equal FP32's).")
    tied = [rows[i] for i in a.get("tied", ())]
    if deploy and tied:
        text.append("As fast within the timing spread (quartiles overlap), less accurate or "
                    "equal: " + "; ".join(f"{_precision(r)} ({_config(r)}, "
                                          f"{figure(r.get('dbpc_pct'), '+.4f')} %)" for r in tied) + ".")
    if fastest is not deploy and fastest["id"] not in a.get("tied", ()):
        text.append(f"The fastest row, {_precision(fastest)} ({_config(fastest)}), "
                    f"{figure(fastest['speedup_fp32'], '.2f')}x FP32, costs "
                    f"{figure(fastest.get('dbpc_pct'), '+.4f')} % bits per character, outside "
                    f"its target.")
    eight = [r for r in s["rows"] if r["family"] in ("int8", "fp8") and r.get("ms")]
    sixteen = [r for r in s["rows"] if r["engine"] == "cuDNN" and r["family"] in ("fp16", "bf16")
               and r.get("ms")]
    if eight and sixteen:
        e, h = min(eight, key=lambda r: r["ms"]), min(sixteen, key=lambda r: r["ms"])
        text.append(f"8 bits against 16: the fastest 8-bit row, {_precision(e)} ({_config(e)}), "
                    f"takes {e['ms']:.3f} ms, cuDNN's fastest 16-bit row ({_config(h)}) "
                    f"{h['ms']:.3f} ms: {h['ms'] / e['ms']:.2f}x"
                    + (" (8 bits buy no time at this size)." if e["ms"] >= h["ms"] else "."))
    for fam, t in (s.get("targets") or {}).items():
        if t.get("met") is None:
            text.append(f"{NAMES[fam]}: {t['reason']}.")
            continue
        best = rows.get(t["best"])
        how = f" ({_config(best)})" if best else ""
        line = (f"{NAMES[fam]}: best {figure(t['dbpc_pct'], '+.4f')} %{how} against a target of "
                f"{t['limit_pct']:g} %, {'met' if t['met'] else 'not met'}")
        if "meeting" in t:
            n = len(t["meeting"]) + len(t["missing"])
            line += (f"; all {n} (part, calibration) pairs meet it" if not t["missing"] else
                     f"; not met by {', '.join(t['missing'])}"
                     f"; met by {', '.join(t['meeting']) or 'none'}")
        text.append(line + ".")
    return "\n".join(f"- {t}" if i else t for i, t in enumerate(text))


def markdown(doc: dict, chart: str = "") -> str:
    """precision.md; ``chart``: the chart's line (:func:`chart_line`), put under the opening."""
    res, s = doc["result"], doc["summary"]
    src = res["source"]
    shape = src["shape"]
    headers, rows = table_rows(doc)
    out = [f"# Precision table: {src['name']}", "",
           f"{shape['cell']} {shape['layers']} layers, hidden {shape['hidden']}, input "
           f"{shape['input_size']}, {shape['direction'].lower()}; batch {shape['batch']} "
           f"sequences of {shape['seq_length']} steps from a zero state. Times are medians of CUDA-graph replays "
           f"where captured (else plain calls) of the RNN forward alone; x FP32 compares "
           f"like with like (replays with replays) and is measured in the same run. Every row "
           f"verified before it was timed: cuDNN against the float64 reference, the 8-bit "
           f"engines (cuBLASLt GEMMs, the persistent kernel) against their float64 twin (the "
           f"same quantized network), within the bound in the JSON; a persistent kernel's "
           f"8-bit row runs the calibration method the GEMM engine did best with. The TF32 row is FLOAT data with DEFAULT, TENSOR_OP or "
           f"TENSOR_OP_ALLOW_CONVERSION math, the last of which lets cuDNN compute in FP16. "
           f"8-bit rows: activations per tensor (calibrated on {src['calibrated_on']}), "
           f"weights per output channel, the other GEMMs in FP16; each shows the calibration "
           f"method that did best on the batch the table is measured on (chosen there, so "
           f"its figure is the best of six; every method's figure is in the calibration "
           f"table).", ""] + ([chart, ""] if chart else []) + [
           tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), "",
           "## Calibration", "",
           ("Δ bits per character against FP32 (%)" if s["task"] else
            "relative error of y against FP32") + " per method; the best in bold.", ""]
    ch, cr = calibration_rows(doc)
    out += [tabulate(cr, headers=ch, tablefmt="github", disable_numparse=True), "",
            "## The answer", "", answer_text(doc), ""]
    if src.get("recorded"):
        rec = src["recorded"]
        out += [f"The recorded float64 figure of the shipped model (at training time): "
                f"{rec['bpc']:.6f} bits/char, top-1 {rec['top1']:.6f}; this run's reference: "
                f"{res['reference']['bpc']:.6f}, {res['reference']['top1']:.6f}.", ""]
    failed = s["not_verified_or_refused"]
    out += [f"## Not verified or refused ({len(failed)})", ""]
    out += [f"- {f['label']}: {f['outcome']}" + (f", {f['call']} -> {f['status']}" if f.get('call') else "")
            + (f" ({f['reason']})" if f.get("reason") else "") for f in failed] or ["none"]
    out += ["", "## Provenance", "", tabulate(
        [(label, doc["provenance"][k]) for k, label in PROVENANCE_KEYS if doc["provenance"].get(k)]
        + [("cuBLASLt", (res.get("cublaslt") or {}).get("cublaslt_version")),
           ("libcublasLt path", (res.get("cublaslt") or {}).get("cublaslt_path")),
           ("job wall time (s)", res["wall_s"]), ("phases (s)", res["phases_s"])],
        headers=("of this run", "value"), tablefmt="github", disable_numparse=True), ""]
    return "\n".join(out)


def _target(r: dict) -> float:
    return 0.1 if r["family"] in ("fp16", "bf16", "tf32", "fp32") else 1.0


def _chart_label(r: dict) -> str:
    """A row's name on the chart: its precision, and for an 8-bit row also its engine
    (the table tells them apart by the configuration column)."""
    name = _precision(r)
    return name + ENGINE_NOTES.get(r["engine"], "") if r.get("calibration") else name


def chart(doc: dict) -> charts.Chart | None:
    """Speed-up over true FP32 per row (bars; green within the precision's accuracy
    target, red outside it), each labelled with its Δ bits/char (or its error against
    FP32); None without a timed row or without matplotlib."""
    rows = [r for r in doc["summary"]["rows"] if r.get("speedup_fp32") is not None]
    if not rows:
        return None
    within, outside = "within its accuracy target", "outside its accuracy target"
    values, notes, ids, groups = {}, {}, {}, []
    for r in rows:
        g = _chart_label(r)
        while g in groups:  # two rows of one name stay two bars
            g += " "
        groups.append(g)
        ok = r.get("dbpc_pct") is None or r["dbpc_pct"] <= _target(r)
        key = (g, within if ok else outside)
        values[key] = r["speedup_fp32"]
        notes[key] = f'{r["speedup_fp32"]:.2f}x, ' + (
            f'{r["dbpc_pct"]:+.3f} % bits/char' if r.get("dbpc_pct") is not None
            else f'error {figure(r.get("error_vs_fp32"), ".1e")} vs FP32')
        ids[key] = "row-" + re.sub(r"[^A-Za-z0-9_.-]", "-", r["id"])
    name = doc["result"]["source"]["name"]
    return charts.bars(
        groups, [within, outside], values, colours={within: "#2ca02c", outside: "#d62728"},
        notes=notes, ids=ids, side_by_side=False, ref=(1.0, "1x true FP32"),
        title=f"{name}: speed-up over true FP32 per precision (graph replays, same run)",
        xlabel="x true FP32 (forward, time per batch)",
        alt=f"Speed-up over true FP32 of each precision of the {name}, green within its "
            "accuracy target")


def chart_line(doc: dict, chart_: charts.Chart | None, file_name: str) -> str:
    """The markdown's line for the chart (its image, or that it was left out); nothing
    for a table without a timed row."""
    if not any(r.get("speedup_fp32") is not None for r in doc["summary"]["rows"]):
        return ""
    return chart_.markdown(file_name) if chart_ else charts.LEFT_OUT


def html(doc: dict, chart_: charts.Chart | None = None) -> str:
    """The page: the chart inline (``chart_``, drawn here when not given; without
    matplotlib the one line saying it was left out), the tables, the answer and the
    provenance."""
    headers, rows = table_rows(doc)
    chart_ = chart_ or chart(doc)
    line = chart_line(doc, None, "") or "No timed row."
    drawn = chart_.svg() if chart_ else f"<p>{escape(line)}</p>"
    ch, cr = calibration_rows(doc)
    def tab(h, rs):
        return ("<table><tr>" + "".join(f"<th>{escape(x)}</th>" for x in h) + "</tr>" +
                "".join("<tr>" + "".join(f"<td>{escape(str(c)).replace('**', '')}</td>" for c in r)
                        + "</tr>" for r in rs) + "</table>")
    name = doc["result"]["source"]["name"]
    prov = "".join(f"<tr><td>{escape(label)}</td><td>{escape(str(doc['provenance'][k]))}</td></tr>"
                   for k, label in PROVENANCE_KEYS if doc["provenance"].get(k))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Precision table: "
            f"{escape(name)}</title><style>{CSS}</style></head><body>"
            f"<h1>Precision table: {escape(name)}</h1>"
            f"<h2>Speed-up over true FP32 (green: within the precision's accuracy target)</h2>"
            f"{drawn}<h2>Table</h2>{tab(headers, rows)}<h2>Calibration</h2>{tab(ch, cr)}"
            f"<h2>The answer</h2><pre>{escape(answer_text(doc))}</pre>"
            f"<h2>Provenance</h2><table class='prov'>{prov}</table></body></html>")


def rendered(doc: dict, stem: str) -> dict:
    """The files of the table ``doc``, made in memory before any is written: ``stem``.md and
    .html (text) and .png (bytes; None without a chart)."""
    drawn = chart(doc)
    return {f"{stem}.md": markdown(doc, chart_line(doc, drawn, f"{stem}.png")),
            f"{stem}.html": html(doc, drawn), f"{stem}.png": drawn.png() if drawn else None}


def write(doc: dict, folder: Path, stem: str, files: dict | None = None) -> list[Path]:
    """``stem``.md, .html and (with matplotlib) .png of the table ``doc`` in ``folder``
    (``files``: :func:`rendered` already); the JSON is the caller's. Returns the paths
    written."""
    return write_files(folder, rendered(doc, stem) if files is None else files)
