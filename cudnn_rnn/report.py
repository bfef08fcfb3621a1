"""``python -m cudnn_rnn.report RESULTS...`` and ``python -m cudnn_rnn.report --diff A B``.

Turns probe results (a ``.jsonl`` file or its directory; several are merged) into
``results/<gpu>/<cudnn-version>/``: ``matrix.md`` (tables and the answers in
words), ``summary.json`` (the same, machine-readable, with a schema version) and
``matrix.html`` (one self-contained page). ``--diff A B`` compares two result sets
and writes ``results/diff/<A>__vs__<B>.md`` (and ``.json``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import provenance
from .cli import BadInput, OneLineParser, run_main
from .reporting import analysis, constraints as cons, diff as diffing, html, load, markdown

SCHEMA_VERSION = 1
ROOT = Path(__file__).resolve().parent.parent


def analyse(result: load.ResultSet, rules: cons.Constraints) -> dict:
    sweep = analysis.sweep(result.records)
    found = cons.contradictions(result.records, rules)
    return {"counts": analysis.counts(result.records),
            "int8": analysis.int8_answer(result.records, result.meta),
            "sweep": sweep, "performance_rule": analysis.performance_rule(sweep["rows"]),
            "contradictions": found, "contradiction_groups": cons.group(found)}


def default_dir(result: load.ResultSet) -> Path:
    prov = result.provenance
    gpu = prov.get("gpu") if prov.get("gpu") and not prov.get("no_gpu_reason") else None
    version = prov.get("cudnn_version") or result.records[0].get("cudnn_version")
    return ROOT / "results" / provenance.slug(gpu) / str(version)


def _report_info(argv, sources) -> dict:
    return {"command": provenance.command(argv), "commit": provenance.commit(),
            "date": provenance.now(), "sources": [str(s) for s in sources]}


def compact(rec: dict) -> dict:
    keep = ("id", "data_type", "math_prec", "math_type", "algo", "cell", "direction", "input_mode",
            "bias_mode", "proj_size", "layout", "shape", "outcome", "failed_stage", "failed_call",
            "status", "status_code", "reason", "errors", "speedup")
    out = {k: rec.get(k) for k in keep}
    out["forward_training_tflops"] = ((rec.get("timings") or {}).get("forward_training") or {}).get("tflops")
    out["timings_ms"] = {k: v["median_ms"] for k, v in (rec.get("timings") or {}).items()}
    return out


def write_report(result: load.ResultSet, out_dir: Path, argv) -> dict:
    rules = cons.load()
    info = _report_info(argv, result.paths)
    a = analyse(result, rules)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "matrix.md").write_text(markdown.render(result, a, info, rules))
    (out_dir / "matrix.html").write_text(html.render(result, a, info))
    cells = sorted((compact(r) for r in result.records), key=lambda r: r["id"])
    summary = {"schema_version": SCHEMA_VERSION, "provenance": result.provenance, "report": info,
               "counts": a["counts"], "int8": a["int8"], "tensor_op_sweep": a["sweep"],
               "documented_rule_checks": {"performance": a["performance_rule"],
                                          "contradictions": a["contradiction_groups"]},
               "constraints_sources": rules.sources, "cells": cells}
    (out_dir / "summary.json").write_text(json.dumps(summary, sort_keys=True, default=list,
                                                     separators=(",", ":")) + "\n")
    return a


def main(argv=None) -> int:
    p = OneLineParser(prog="cudnn_rnn.report", description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="*", help="probe .jsonl files or their directories")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two result sets")
    p.add_argument("--out", default=None, help="output directory")
    args = p.parse_args(argv)
    argv_list = argv if argv is not None else sys.argv
    if args.diff:
        if args.results:
            raise BadInput("--diff takes exactly two result sets and no other results")
        a, b = load.load(args.diff[0]), load.load(args.diff[1])
        d = diffing.compare(a, b)
        info = _report_info(argv_list, a.paths + b.paths)
        name = f"{_name(a)}__vs__{_name(b)}"
        out_dir = Path(args.out) if args.out else ROOT / "results" / "diff"
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{name}.md").write_text(diffing.render(d, info))
        (out_dir / f"{name}.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION,
                                                          "report": info, **d}, indent=1) + "\n")
        print(f"{d['common']} common cells: {len(d['status_changes'])} status changes, "
              f"{len(d['speed_changes'])} speed changes -> {out_dir / name}.md")
        return 0
    if not args.results:
        raise BadInput("give the probe results to report on (a .jsonl file or its directory)")
    result = load.load(*args.results)
    out_dir = Path(args.out) if args.out else default_dir(result)
    a = write_report(result, out_dir, argv_list)
    print(f"{len(result.records)} cells ({', '.join(f'{k} {v}' for k, v in a['counts'].items())}); "
          f"{len(a['contradictions'])} measured-vs-documented contradictions -> "
          f"{out_dir}/matrix.md, matrix.html, summary.json")
    return 0


def _name(result: load.ResultSet) -> str:
    """``nvidia-h200-9.19.0``: the GPU (or no-gpu) and the cuDNN version of a result set."""
    d = default_dir(result)
    return f"{d.parent.name}-{d.name}"


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.report")


if __name__ == "__main__":
    sys.exit(cli())
