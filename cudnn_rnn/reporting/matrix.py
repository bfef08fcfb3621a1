"""The support-matrix report of a result set: ``matrix.md``, ``matrix.html``, ``summary.json``
and, where the set has a timed shape sweep, its chart ``matrix.png`` (:mod:`.charts`)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cudnn_rnn.matrix import provenance
from cudnn_rnn.matrix.errors import BadInput
from cudnn_rnn.matrix.runs import read_json_dict
from cudnn_rnn.reporting import (analysis, axes, bench, constraints as cons, eightbit, html, load,
                                 markdown, product)
from cudnn_rnn.reporting.files import write_files

SCHEMA_VERSION = 1
FILES = ("matrix.md", "matrix.html", "summary.json")


def analyse(result: load.ResultSet, rules: cons.Constraints, eight_bit: dict | None = None
            ) -> dict:
    """What the report says; ``eight_bit``: the project's own 8-bit paths at the seed's
    shape (:func:`eight_bit_paths`), for the INT8 answer."""
    sweep = analysis.sweep(result.records)
    found = cons.contradictions(result.records, rules)
    int8 = analysis.int8_answer(result.records, result.meta)
    if eight_bit:
        int8 = dict(int8, project_8bit=eight_bit)
    return {"counts": analysis.counts(result.records),
            "int8": int8,
            "sweep": sweep, "performance_rule": analysis.performance_rule(sweep["rows"]),
            "contradictions": found, "contradiction_groups": cons.group(found),
            "axes": axes.summarise(result.records),
            "product": product.summarise(result.records), "wrong": product.wrong(result.records)}


def report_info(command_line: str, sources) -> dict:
    return {"command": command_line, "commit": provenance.commit(),
            "date": provenance.now(), "sources": [str(s) for s in sources]}


def compact(rec: dict) -> dict:
    keep = ("id", "data_type", "math_prec", "math_type", "algo", "cell", "direction", "input_mode",
            "bias_mode", "proj_size", "layout", "lengths", "varies", "shape", "outcome", "failed_stage", "failed_call",
            "status", "status_code", "reason", "errors", "speedup")
    out = {k: rec.get(k) for k in keep}
    out["forward_training_tflops"] = ((rec.get("timings") or {}).get("forward_training") or {}).get("tflops")
    out["timings_ms"] = {k: v["median_ms"] for k, v in (rec.get("timings") or {}).items()}
    return out


def name(result: load.ResultSet) -> str:
    """``nvidia-h200-9.19.0``: the GPU (or no-gpu) and the cuDNN version of a result set."""
    prov = result.provenance
    gpu = prov.get("gpu") if prov.get("gpu") and not prov.get("no_gpu_reason") else None
    return provenance.folder_name(gpu, prov.get("cudnn_version")
                                  or result.records[0].get("cudnn_version"))


def run_name(result: load.ResultSet) -> str:
    """The default report folder of a result set: :func:`name`, its specs and a key of the
    records read (``nvidia-h200-9.19.0-default+seed_int8-1a2b3c4d``), so reports of
    different runs never share a folder, and the report of one run replaces only its own."""
    specs = "+".join(dict.fromkeys(load.spec_name(p) for p in result.paths))
    digest = hashlib.sha256()
    for path in result.paths:
        digest.update(Path(path).read_bytes())
    return f"{name(result)}-{specs}-{digest.hexdigest()[:8]}"


def eight_bit_paths(bench_dir) -> dict:
    """The project's 8-bit paths at the seed's shape from the benchmark run in
    ``bench_dir`` (:func:`cudnn_rnn.reporting.eightbit.seed_answers`), with where and when
    they were measured."""
    summary = bench.read(bench_dir)
    runs = summary.get("runs") or []
    prov = (runs[0].get("provenance") or {}) if runs else {}
    return {"source": str(bench_dir), "gpu": prov.get("gpu"), "commit": prov.get("commit"),
            "date": prov.get("date"), "rows": eightbit.seed_answers(summary["eight_bit"])}


def write_report(result: load.ResultSet, out_dir: Path, command_line: str,
                 eight_bit: dict | None = None) -> list[Path]:
    """Write the report into ``out_dir`` (which must exist): the three files and the chart
    where there is one; returns their paths.
    ``command_line`` is the command that made them (:func:`cudnn_rnn.matrix.provenance.command`);
    ``eight_bit``: :func:`eight_bit_paths` of a benchmark run, for the INT8 answer."""
    rules = cons.load()
    info = report_info(command_line, result.paths)
    a = analyse(result, rules, eight_bit)
    md, page, js = (out_dir / f for f in FILES)
    png = out_dir / html.CHART
    chart = html.sweep_chart(a["sweep"])
    text = markdown.render(result, a, info, rules, html.chart_line(a["sweep"], chart))
    cells = sorted((compact(r) for r in result.records), key=lambda r: r["id"])
    summary = {"schema_version": SCHEMA_VERSION, "provenance": result.provenance, "report": info,
               "runs": [{"file": n, "provenance": m.get("provenance")}
                        for n, (_f, m) in zip(result.run_names(), result.runs)],
               "counts": a["counts"], "int8": a["int8"], "tensor_op_sweep": a["sweep"],
               "axes": a["axes"], "product_axes": a["product"], "wrong_results": a["wrong"],
               "documented_rule_checks": {"performance": a["performance_rule"],
                                          "contradictions": a["contradiction_groups"]},
               "constraints_sources": rules.sources, "cells": cells}
    files = {md.name: text, page.name: html.render(result, a, info, text, chart),
             js.name: json.dumps(summary, sort_keys=True, default=list,
                                 separators=(",", ":")) + "\n",
             png.name: chart.png() if chart else None}  # every file made before any is written
    try:
        write_files(out_dir, files)
    except OSError as exc:
        raise BadInput(f"cannot write the report into {out_dir} ({exc}); choose another "
                       "--out") from None
    return [md, page, js] + ([png] if chart else [])


def others_report(folder, paths) -> str | None:
    """The sources of the report ``folder`` holds where they are not the runs ``paths``
    (records files), each and no other (a report of several runs, as results/ holds, is
    another's to one of them); None where it holds none or theirs. A source recorded
    relative to another working directory counts as one of ``paths`` only where its path
    ends as that one's does (an archived ``.gz`` as the run it archived)."""
    summary = read_json_dict(Path(folder) / "summary.json") or {}
    sources = (summary.get("report") or {}).get("sources") if isinstance(summary, dict) else None
    if not isinstance(sources, list) or not sources:
        return None
    owns = [parts(Path(p).resolve()) for p in paths]
    mine = [isinstance(s, str) and any(same_run(s, own) for own in owns) for s in sources]
    if all(mine) and all(any(isinstance(s, str) and same_run(s, own) for s in sources)
                         for own in owns):
        return None
    return ", ".join(str(s) for s in sources[:3])


def others_records(folder, paths) -> list[str]:
    """The probe runs' records files (``*.jsonl``, ``*.jsonl.gz``; a benchmark's
    ``bench.jsonl`` has reports of its own names) ``folder`` holds that are not among the
    runs ``paths``: a matrix report written there would sit beside another run's records,
    as if it were theirs."""
    d = Path(folder)
    if not d.is_dir():
        return []
    own = {Path(p).resolve() for p in paths}
    return sorted(f.name for f in [*d.glob("*.jsonl"), *d.glob("*.jsonl.gz")]
                  if f.is_file() and f.resolve() not in own and load.is_probe_run(f))


def foreign(folder, paths) -> str | None:
    """What in ``folder`` belongs to another run than ``paths`` (records files): the report of
    other runs (:func:`others_report`) or other runs' records (:func:`others_records`), in
    words; None where a report of ``paths`` is theirs to write there. The one rule the
    report's ``--out`` and the probe's ``--report`` follow."""
    other = others_report(folder, paths)
    if other:
        return f"the report of {other}"
    records = others_records(folder, paths)
    return f"another run's records ({', '.join(records[:3])})" if records else None


def parts(path: Path) -> tuple:
    """A records file's path as parts, an archive's ``.gz`` dropped."""
    name = path.name[:-len(".gz")] if path.name.endswith(".gz") else path.name
    return path.parent.parts + (name,)


TAIL = 4  # an absolute source names this run where its last parts agree: results/<gpu>/<cudnn>/
          # <file>, or runs/<machine>-<key>/<spec>-<key>/<file>


def same_run(source: str, own: tuple) -> bool:
    """Whether a report's ``source`` names the records file of :func:`parts` ``own``: a
    relative one by its path's end, an absolute one as that file or, where the report was
    written in another checkout or before the folders moved, by its last :data:`TAIL`
    parts (``results/nvidia-h200/9.14.0/default.jsonl``)."""
    if Path(source).is_absolute():
        return parts(Path(source).resolve()) == own or parts(Path(source))[-TAIL:] == own[-TAIL:]
    tail = tuple(p for p in parts(Path(source)) if p not in ("", "."))
    return ".." not in tail and own[-len(tail):] == tail
