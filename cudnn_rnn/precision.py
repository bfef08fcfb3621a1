"""``python -m cudnn_rnn.precision``: time and accuracy of a trained RNN in every precision.

The shipped character model (``--model lstm``, the default, or ``gru``: trained by ``make
model`` on Python's standard library) or a user's own ``torch.nn.LSTM``/``GRU``/``RNN``
(``--weights`` a state_dict as .pt, .safetensors or .npz, ``--inputs`` a .npy batch of
shape (seq, batch, input), optionally ``--calibration`` another such batch) runs in every
cuDNN configuration of FP32, TF32, FP16 and BF16 and in the 8-bit GEMM engine (INT8 and FP8
E4M3 on each part, with each calibration method), each verified before it is timed
(:mod:`cudnn_rnn.charlm.table`). Printed, and written as ``precision[-NAME].md``, ``.json``
and ``.html`` into ``OUT/<gpu>/<cudnn version>/`` (``--out``, default ``results``): one row
per precision (time per batch and per sequence, speed-up over true FP32, bits per
character, top-1 accuracy, agreement with FP32's predictions, largest change of a logit),
every calibration method's figure, and which precision to deploy.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import network
from cudnn_rnn.charlm.summary import summarise
from cudnn_rnn.charlm.table import load_source, precision_table
from cudnn_rnn.cli import BadInput, OneLineParser, positive_float, positive_int, run_main
from cudnn_rnn.engine.gpu import NoGPU
from cudnn_rnn.lowbit.calibration import METHODS
from cudnn_rnn.matrix import provenance
from cudnn_rnn.matrix.jobs import name_of
from cudnn_rnn.matrix.worker import start_worker
from cudnn_rnn.reporting import precision as report

SHIPPED = ("lstm", "gru")
PLAIN_CELLS = {"tanh": RNNMode.RNN_TANH, "relu": RNNMode.RNN_RELU}


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.precision", description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=SHIPPED, default="lstm",
                   help="the shipped character model (default lstm)")
    p.add_argument("--weights", help="a user's state_dict: .pt, .safetensors or .npz")
    p.add_argument("--inputs", help="the user's input batch: .npy of shape (seq, batch, input)")
    p.add_argument("--calibration", help="a .npy batch to calibrate on (default: the inputs)")
    p.add_argument("--plain-cell", choices=PLAIN_CELLS, default="tanh",
                   help="the nonlinearity of a plain torch.nn.RNN's weights (default tanh)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help=f"calibration methods, comma-separated (default {','.join(METHODS)})")
    p.add_argument("--out", default="results", help="results root (default results)")
    p.add_argument("--name", help="the files' name after precision- (default: gru for the "
                   "shipped GRU, user-STEM for --weights STEM.pt; none for the shipped LSTM)")
    p.add_argument("--reps", type=positive_int, default=20, help="most timed calls per measurement")
    p.add_argument("--budget", type=positive_float, default=0.1,
                   help="about this many seconds of device time per measurement")
    p.add_argument("--cudnn", default=None, help="the libcudnn to load")
    p.add_argument("--timeout", type=positive_float, default=900.0,
                   help="seconds for the whole table before giving up")
    return p


def _spec(args) -> tuple[dict, str]:
    if args.weights or args.inputs or args.calibration:
        if not (args.weights and args.inputs):
            raise BadInput("a user's model needs both --weights and --inputs")
        spec = {"weights": str(Path(args.weights).resolve()),
                "inputs": str(Path(args.inputs).resolve()),
                "calibration": str(Path(args.calibration).resolve()) if args.calibration else None,
                "plain_cell": PLAIN_CELLS[args.plain_cell]}
        return spec, args.name or "user-" + Path(args.weights).stem
    return {"model": str(network.shipped(args.model))}, args.name or (
        "" if args.model == "lstm" else args.model)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise BadInput(f"unknown calibration method {', '.join(unknown) or '(none given)'} "
                       f"(choose from {', '.join(METHODS)})")
    spec, name = _spec(args)
    if name and not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise BadInput(f"--name {name!r}: use letters, digits, '-', '_' or '.'")
    load_source(spec)  # a bad file is one line and exit 2 before any GPU work
    out_root = Path(args.out)
    if out_root.exists() and not out_root.is_dir():
        raise BadInput(f"--out {out_root} is a file; give a folder")
    worker, info = start_worker(args.cudnn, {"reps": args.reps, "time": True})
    try:
        if not info["device_stages"]:
            raise NoGPU(f"the precision table needs a CUDA GPU: {info['device'].get('reason')}")
        result = worker.job(name_of(precision_table), {
            "spec": spec, "reps": args.reps, "budget_s": args.budget, "methods": methods},
            timeout=args.timeout)
    finally:
        worker.close()
    if "records" not in result:
        print(f"cudnn_rnn.precision: the table was not made: {result.get('skipped')}",
              file=sys.stderr)
        return 1
    prov = provenance.collect(info["library"] | {"cublaslt": (result.get("cublaslt") or {})},
                              info["device"], provenance.command("cudnn_rnn.precision", argv))
    doc = {"summary": summarise(result), "result": result, "provenance": prov}
    folder = out_root / provenance.slug(prov["gpu"]) / str(prov["cudnn_version"])
    folder.mkdir(parents=True, exist_ok=True)
    stem = "precision" + (f"-{name}" if name else "")
    (folder / f"{stem}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (folder / f"{stem}.md").write_text(report.markdown(doc))
    (folder / f"{stem}.html").write_text(report.html(doc))
    print(report.markdown(doc))
    print(f"written: {folder / stem}.md, .json, .html")
    return 0 if doc["summary"]["rows"] else 1


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.precision")


if __name__ == "__main__":
    sys.exit(cli())
