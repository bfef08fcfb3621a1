"""``python -m cudnn_rnn.report RUN...`` and ``python -m cudnn_rnn.report --diff A B``.

Turns probe results (a run's folder or its ``.jsonl``; several are merged) into
``matrix.md`` (tables and the answers in words), ``summary.json`` (the same,
machine-readable, with a schema version) and ``matrix.html`` (one self-contained page),
written to ``--out`` or by default to ``reports/<gpu>-<cudnn>-<specs>-<key>/`` (the key: of the
records read, so the reports of two runs never share a folder). ``--diff A B``
compares two result sets and writes ``<A>__vs__<B>.md`` (and ``.json``; each side named as
its report folder is) to ``--out`` or ``reports/diff/``. Reading never writes beside the
results read: a committed run in ``results/`` stays as it is unless ``--out`` names its
folder, and an ``--out`` that holds the report of other runs is refused.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from cudnn_rnn.matrix import provenance, runs
from cudnn_rnn.cli import BadInput, OneLineParser, run_main
from cudnn_rnn.reporting import analysis, diff as diffing, load
from cudnn_rnn.reporting.markdown import outcomes_line
from cudnn_rnn.reporting.matrix import (SCHEMA_VERSION, eight_bit_paths, foreign, report_info,
                                       run_name, write_report)


def main(argv=None) -> int:
    p = OneLineParser(prog="cudnn_rnn.report", description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="*", help="probe runs: their folders or .jsonl files")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two result sets")
    p.add_argument("--out", default=None,
                   help="output folder (default reports/<gpu>-<cudnn>-<specs>-<key>/, or "
                        "reports/diff/)")
    p.add_argument("--eight-bit", metavar="BENCH_DIR", default=None,
                   help="a benchmark run (python -m cudnn_rnn.bench) whose 8-bit rows at the "
                        "seed's shape the INT8 answer names beside cuDNN's refusal")
    args = p.parse_args(argv)
    command_line = provenance.command("cudnn_rnn.report", argv)
    if not all((args.results or []) + (args.diff or [])):  # "" would read as this folder
        raise BadInput("an empty name is no result set: give a run's folder or its .jsonl file")
    if args.diff:
        if args.results:
            raise BadInput("--diff takes exactly two result sets and no other results")
        if args.eight_bit is not None:
            raise BadInput("--eight-bit adds to a report's INT8 answer; a --diff has none: "
                           "drop one of them")
        a, b = load.load(args.diff[0]), load.load(args.diff[1])
        d = diffing.compare(a, b)
        info = report_info(command_line, a.paths + b.paths)
        stem = f"{run_name(a)}__vs__{run_name(b)}"  # two pairs of runs never share a file
        out_dir = runs.output_dir(args.out) if args.out is not None else \
            runs.report_folder("diff")
        (out_dir / f"{stem}.md").write_text(diffing.render(d, info))
        (out_dir / f"{stem}.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION,
                                                          "report": info, **d}, indent=1) + "\n")
        print(f"{d['common']} common cells: {len(d['status_changes'])} status changes, "
              f"{len(d['speed_changes'])} speed changes -> {out_dir / stem}.md")
        return 0
    if not args.results:
        raise BadInput("give the probe results to report on (a run's folder or its .jsonl file)")
    result = load.load(*args.results)
    eight_bit = None
    if args.eight_bit is not None:
        if not (Path(args.eight_bit) / "bench.jsonl").is_file():
            raise BadInput(f"--eight-bit {args.eight_bit}: no bench.jsonl there; give a "
                           "benchmark's run folder (python -m cudnn_rnn.bench --out DIR)")
        eight_bit = eight_bit_paths(args.eight_bit)
        if not eight_bit["rows"]:
            print(f"--eight-bit {args.eight_bit}: that benchmark has no 8-bit rows at the seed's "
                  "shape (20 2 512 64); the INT8 answer names none", file=sys.stderr)
    if args.out is not None:
        other = foreign(args.out, result.paths)
        if other:
            raise BadInput(f"--out {args.out} holds {other}: give another --out (or none: "
                           f"reports/ then has a folder of this run's own)")
    out_dir = runs.output_dir(args.out) if args.out is not None else \
        runs.report_folder(run_name(result))
    written = write_report(result, out_dir, command_line, eight_bit)
    if result.incomplete:
        print("an unfinished run (cut before its end, or still being written): "
              + "; ".join(result.incomplete) + " recorded; its report says so", file=sys.stderr)
    counts = analysis.counts(result.records)
    print(f"{len(result.records)} cells ({outcomes_line(counts)}) -> "
          f"{', '.join(str(w) for w in written)}")
    return 0


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.report")


if __name__ == "__main__":
    sys.exit(cli())
