"""``python -m cudnn_rnn.bench_report DIR``: bench.md and bench.json from a benchmark's run
folder (what ``make bench`` writes at its end), into ``reports/`` or ``--out``. Reading never
writes into ``DIR``."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from cudnn_rnn.cli import BadInput, OneLineParser, run_main
from cudnn_rnn.matrix.bench import read_run_file
from cudnn_rnn.matrix.provenance import folder_name
from cudnn_rnn.matrix.runs import output_dir, read_json_dict, report_folder
from cudnn_rnn.reporting.bench import write


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.bench_report", description=__doc__.splitlines()[0])
    p.add_argument("directory", help="a folder holding bench.jsonl and bench.run.json")
    p.add_argument("--out", default=None,
                   help="output folder (default reports/<gpu>-<cudnn>-bench-<key>/, the key of "
                        "the records read)")
    return p


def others_benchmark(out: Path, d: Path, runs: list) -> str | None:
    """What in ``out`` belongs to another benchmark than the one in ``d`` (its ``runs``):
    another benchmark's records, or a report of sessions that are not among this one's (a
    report of this benchmark before it was continued is its own, and so is any report in
    ``d`` itself, whatever an older one there lists); None where nothing does."""
    if out.resolve() == d.resolve():  # the records' own folder: its report is theirs
        return None
    if (out / "bench.jsonl").is_file():
        return "another benchmark's records (bench.jsonl): a report there would read as theirs"
    theirs = read_json_dict(out / "bench.json") if (out / "bench.json").is_file() else None
    if theirs is None:
        return None
    sessions = {r.get("session") for r in theirs.get("runs") or [] if isinstance(r, dict)}
    if not sessions <= {r["session"] for r in runs}:
        return (f"the report of another benchmark (sessions "
                f"{', '.join(sorted(map(str, sessions))[:3])})")
    return None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    d = Path(args.directory)
    if not d.is_dir():
        raise BadInput(f"{args.directory} is not a folder (give a benchmark's run folder)")
    if not (d / "bench.jsonl").is_file():
        if any(d.glob("*.jsonl")) or any(d.glob("*.jsonl.gz")):  # a probe's run
            raise BadInput(f"{args.directory} holds probe results, not a benchmark (no "
                           f"bench.jsonl): their report is python -m cudnn_rnn.report "
                           f"{args.directory}")
        raise BadInput(f"{args.directory}: no bench.jsonl here; run make bench first")
    runs = read_run_file(d / "bench.run.json")["runs"]
    if args.out is None:
        p0 = runs[0]["provenance"] if runs else {}
        key = hashlib.sha256((d / "bench.jsonl").read_bytes()).hexdigest()[:8]
        out = report_folder(f"{folder_name(p0.get('gpu'), p0.get('cudnn_version'))}"
                            f"-bench-{key}")  # another run, another folder
    else:
        other = others_benchmark(Path(args.out), d, runs)
        if other:
            raise BadInput(f"--out {args.out} holds {other}: give another --out (or none: "
                           f"reports/ then has a folder of this benchmark's own)")
        out = output_dir(args.out)
    md = write(d, out, empty_ok=False)
    made = [md.name] + [n for n in ("bench.json", "bench.png") if (md.parent / n).is_file()]
    print(f"wrote {', '.join(made)} in {md.parent}")
    return 0


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.bench_report")


if __name__ == "__main__":
    sys.exit(cli())
