"""``python -m cudnn_rnn.overhead``: does the ctypes path cost anything next to PyTorch?

For each shape, the configuration PyTorch really uses is read from cuDNN's API log of a
PyTorch run (:func:`cudnn_rnn.compare.pytorch.observe`: algorithm, data type, math precision, math
type, layout, padded-IO flag, forward mode). The same configuration then runs through
this project's flow, is verified against the float64 reference, and is timed against
``torch.nn.LSTM``/``GRU``/``RNN`` with the state passed in, so both sides do the same
work: one ``cudnnRNNForward``. Both are timed in one process, on one CUDA stream, with
the same event method, alternating in ``--rounds`` rounds; the ratio is ours / PyTorch's
(target ≤ 1.03). Beside it, three figures show where any difference comes from: the
host time to enqueue one call on an idle GPU, the latency of one call issued on an idle
GPU, and the *host-ahead* ratio, of calls queued behind a long GEMM so that the GPU never
waits for the host. Where the host-ahead ratio is 1 and the back-to-back ratio is not,
the difference is in how fast the host feeds cuDNN's launches, not in the GPU work.
"""
from __future__ import annotations

import json
import statistics
import sys

from tabulate import tabulate

from cudnn_rnn.bench import default_run_dir
from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.cli import BadInput, OneLineParser, positive_int, run_main
from cudnn_rnn.compare.overhead import TARGET, measure_pair, merge_processes
from cudnn_rnn.compare.pytorch import observe
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.gpu import NoGPU
from cudnn_rnn.matrix import provenance, runs
from cudnn_rnn.matrix.jobs import name_of
from cudnn_rnn.matrix.record import config_label, write_json
from cudnn_rnn.matrix.worker import start_worker
from cudnn_rnn.reporting import bench as bench_report

# float16 at the seed shape for every cell: where PyTorch's best (its float16 module,
# captured) beat the bench's winner on the same configuration, this is the same call
DEFAULT_SHAPES = ("LSTM:20,2,512,64", "LSTM:20,1,128,8", "LSTM:25,1,1024,64",
                  "LSTM:25,1,2048,128", "LSTM:25,1,4096,128", "GRU:25,1,1024,64",
                  "LSTM:25,1,1024,64:float16", "LSTM:20,2,512,64:float16",
                  "GRU:20,2,512,64:float16", "RNN_RELU:20,2,512,64:float16",
                  "RNN_TANH:20,2,512,64:float16")


def parse_shape(text: str) -> dict:
    """``CELL:T,L,H,B[:dtype]`` (seqLength, layers, hidden, batch; dtype of PyTorch's module)."""
    parts = text.split(":")
    try:
        cell = parts[0].upper()
        if cell not in RNNMode.__members__:
            raise ValueError
        t, l, h, b = (int(v) for v in parts[1].split(","))
        dtype = parts[2] if len(parts) > 2 else "float32"
        if min(t, l, h, b) < 1 or dtype not in ("float32", "float16", "bfloat16") or len(parts) > 3:
            raise ValueError
    except (ValueError, IndexError):
        raise BadInput(f"bad --shape {text!r}: write CELL:T,L,H,B[:float32|float16|bfloat16], "
                       "e.g. LSTM:20,2,512,64") from None
    try:
        RNNConfig(seq_length=t, num_layers=l, hidden_size=h, mini_batch=b, mode=RNNMode[cell])
    except ValueError as exc:
        raise BadInput(f"bad --shape {text!r}: {exc}") from None
    return {"cell": cell, "seq": t, "layers": l, "hidden": h, "batch": b, "input_size": h,
            "bidirectional": False, "dtype": dtype}


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.overhead", description=__doc__.splitlines()[0])
    p.add_argument("--shape", action="append", type=parse_shape, default=None,
                   help="CELL:T,L,H,B[:dtype] (repeatable; default: a set from 128 to 4096 hidden)")
    p.add_argument("--mode", choices=("inference", "training", "both"), default="both",
                   help="PyTorch's eval() forward, its training-mode forward, or both")
    p.add_argument("--reps", type=positive_int, default=50, help="most timed calls per measurement")
    p.add_argument("--rounds", type=positive_int, default=7, help="alternating rounds per pair")
    p.add_argument("--processes", type=positive_int, default=1,
                   help="measure every pair in this many fresh processes (the ratio is then "
                        "the median over processes and the range is between processes)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", default=None, help="also write overhead.json into this directory")
    p.add_argument("--save", action="store_true",
                   help="write overhead.json into this machine's run folder of probes/bench.toml "
                        "(runs/...; what make bench does) and refresh bench.md there")
    p.add_argument("--cudnn", default=None, help="path of the libcudnn to use (default: PyTorch's)")
    return p


def _measure_in_one_process(args, requests: list[dict], observed: list[dict] | None):
    """One fresh worker process measures every pair; returns (rows, observed, worker info).
    PyTorch is observed (once) by the first process, after it has found a GPU."""
    worker, info = start_worker(args.cudnn, {"reps": args.reps})
    try:
        if not info["device_stages"]:
            raise NoGPU(f"the overhead check needs a CUDA GPU: {info['device'].get('reason')}")
        if observed is None:
            observed = observe(requests)  # each {"skipped": why} when PyTorch cannot run
        rows = []
        for req, seen in zip(requests, observed):
            shape = {k: v for k, v in req.items() if k != "training"}
            row = {"shape": shape, "training_mode": req["training"], "observed": seen}
            if "skipped" in seen:
                row["skipped"] = seen["skipped"]
            elif seen.get("cudnn_version") != info["library"].get("cudnn_version_raw"):
                row["skipped"] = (f"PyTorch ran cuDNN {seen.get('cudnn_version')}, this worker "
                                  f"{info['library'].get('cudnn_version')}: not the same library")
            else:
                row.update(worker.job(name_of(measure_pair),
                                      {"shape": shape, "settings": seen, "reps": args.reps,
                                       "rounds": args.rounds}))
            rows.append(row)
    finally:
        worker.close()
    return rows, observed, info


def run(args, command_line: str) -> dict:
    """Observe PyTorch, then measure each pair in ``args.processes`` fresh worker processes,
    one after the other; returns the report dict."""
    shapes = args.shape or [parse_shape(s) for s in DEFAULT_SHAPES]
    modes = {"inference": [False], "training": [True], "both": [False, True]}[args.mode]
    requests = [dict(s, training=t) for s in shapes for t in modes]
    per_process, observed = [], None
    for _ in range(args.processes):
        rows, observed, info = _measure_in_one_process(args, requests, observed)
        per_process.append(rows)
    rows = merge_processes(per_process)
    measured = [r["ratio"] for r in rows if "ratio" in r]
    return {"target": TARGET, "processes": args.processes, "rounds": args.rounds, "rows": rows,
            "worst_ratio": max(measured) if measured else None,
            "median_ratio": statistics.median(measured) if measured else None,
            "worst_single_process": max((p["ratio"] for r in rows for p in r.get("processes", [r])
                                         if "ratio" in p), default=None),
            "provenance": provenance.collect(info["library"], info["device"], command_line),
            "machine": runs.machine_identity(info["library"], info["device"], True)}


def table(report: dict) -> str:
    rows = []
    for r in report["rows"]:
        s = r["shape"]
        name = f"{s['cell']} {s['seq']},{s['layers']},{s['hidden']},{s['batch']} {s['dtype']}"
        if "ratio" not in r:
            rows.append((name, "train" if r["training_mode"] else "eval", "", "", "", "", "",
                         "", r.get("skipped", "")))
            continue
        c = r["config"]
        rows.append((name, r["fwd_mode"].lower(),
                     config_label(c),
                     f"{r['ours']['median_ms']:.4f}", f"{r['torch']['median_ms']:.4f}",
                     f"{r['ratio']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})",
                     f"{r['host_enqueue']['ours_us']:.0f} / {r['host_enqueue']['torch_us']:.0f}",
                     f"{r['isolated_ratio']:.3f}", _f3(r.get("queued_ratio"))))
    return tabulate(rows, headers=("shape (T,L,H,B)", "fwd mode", "cuDNN config PyTorch used",
                                   "ours ms", "torch ms", "ratio (range over " + (
                                       "processes)" if report.get("processes", 1) > 1 else "rounds)"),
                                   "host µs ours/torch",
                                   "idle-GPU ratio", "host-ahead ratio"))


def _f3(v) -> str:
    return "" if v is None else f"{v:.3f}"


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    out = runs.output_dir(args.out) if args.out is not None else None
    report = run(args, provenance.command("cudnn_rnn.overhead", argv))
    if args.save and out is None:
        out = runs.run_folder(default_run_dir(report["machine"]))
    if out is not None:
        write_json(out / "overhead.json", report)
        if (out / "bench.jsonl").exists():
            print(f"refreshed {bench_report.write(out, out)}")
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(table(report))
        w = report["worst_ratio"]
        over = (f"median of {report['processes']} processes; worst single process "
                f"{report['worst_single_process']:.3f}") if report["processes"] > 1 else "one process"
        print(f"\nworst ratio ours/PyTorch {w:.3f} ({over}; target ≤ {TARGET})" if w is not None
              else "\nno pair was measured")
    return 0 if report["worst_ratio"] is not None else 1


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.overhead")


if __name__ == "__main__":
    sys.exit(cli())
