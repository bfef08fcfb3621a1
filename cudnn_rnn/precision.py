"""``python -m cudnn_rnn.precision``: time and accuracy of a trained RNN in every precision.

The shipped character model (``--model lstm``, the default, or ``gru``: trained by ``make
model`` on Python's standard library) or a user's own ``torch.nn.LSTM``/``GRU``/``RNN``
(``--weights`` a state_dict as .pt, .safetensors or .npz, ``--inputs`` a .npy batch of
shape (seq, batch, input), optionally ``--calibration`` another such batch) runs in every
cuDNN configuration of FP32, TF32, FP16 and BF16 and in the 8-bit GEMM engine (INT8 and FP8
E4M3 on each part, with each calibration method), each verified before it is timed
(:mod:`cudnn_rnn.charlm.table`). Printed, and written as ``precision[-NAME].md``, ``.json``
and ``.html`` into this machine's run folder (``runs/<gpu>-cudnn<version>-<key>/precision-<key>/``,
see :mod:`cudnn_rnn.matrix.runs`), or into ``OUT/<gpu>/<cudnn version>/`` with ``--out OUT``
(``make precision`` gives ``--out results``, for the committed tables; ``--render JSON``
renders a recorded table again, without a GPU): one row
per precision (time per batch and per sequence, speed-up over true FP32, bits per
character, top-1 accuracy, agreement with FP32's predictions, largest change of a logit),
every calibration method's figure, and which precision to deploy.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import network
from cudnn_rnn.charlm.summary import summarise
from cudnn_rnn.charlm.table import FLOAT_FAMILIES, load_source, precision_table
from cudnn_rnn.cli import BadInput, OneLineParser, positive_float, positive_int, run_main
from cudnn_rnn.engine.gpu import NoGPU
from cudnn_rnn.lowbit.calibration import METHODS
from cudnn_rnn.matrix import provenance, runs, warmup, writer_lock
from cudnn_rnn.matrix.errors import UNREPORTABLE
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
    p.add_argument("--out", default=None,
                   help="write into OUT/<gpu>/<cudnn version>/ (default: this machine's run "
                        "folder under runs/)")
    p.add_argument("--name", help="the files' name after precision- (default: gru for the "
                   "shipped GRU, user-STEM for --weights STEM.pt; none for the shipped LSTM)")
    p.add_argument("--reps", type=positive_int, default=20, help="most timed calls per measurement")
    p.add_argument("--budget", type=positive_float, default=0.1,
                   help="about this many seconds of device time per measurement")
    p.add_argument("--cudnn", default=None, help="the libcudnn to load")
    p.add_argument("--timeout", type=positive_float, default=900.0,
                   help="seconds for the whole table before giving up")
    p.add_argument("--render", metavar="JSON",
                   help="no GPU: render a recorded table (its precision*.json) again, as .md, "
                        ".html and .png, into reports/ (or OUT/<gpu>/<cudnn version>/ with "
                        "--out), with a copy of the JSON beside them where it is not there "
                        "already; the JSON given is read, never written")
    return p


def render(args) -> int:
    """``--render JSON``: the table's report from its recorded JSON, no GPU and no worker."""
    src = Path(args.render)
    try:
        doc = json.loads(src.read_text())
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise BadInput(f"--render {src}: not a readable JSON file ({exc})") from None
    if not isinstance(doc, dict) or not {"summary", "result", "provenance"} <= set(doc):
        raise BadInput(f"--render {src}: not a precision table (python -m cudnn_rnn.precision "
                       "writes one as precision*.json)")
    prov = doc["provenance"]
    if not isinstance(prov, dict):
        raise BadInput(f"--render {src}: its provenance is not a table of fields (render a "
                       "precision*.json python -m cudnn_rnn.precision wrote)")
    try:  # every file made before any is written: a table that fails leaves nothing behind
        files = report.rendered(doc, src.stem)
    except UNREPORTABLE as exc:
        raise BadInput(f"--render {src}: not a precision table this version renders "
                       f"({type(exc).__name__}: {str(exc)[:120]}); render a precision*.json "
                       "python -m cudnn_rnn.precision wrote") from None
    # names read from the file, as path components (no separator, never ..)
    where = provenance.results_path(prov.get("gpu"), prov.get("cudnn_version")).parts
    if args.out is not None:
        if Path(args.out).resolve().parts[-2:] == where:
            raise BadInput(f"--out {args.out} is already a <gpu>/<cudnn> folder: --out names the "
                           f"folder above them (the table goes to OUT/{where[0]}/{where[1]}/), "
                           f"e.g. --out {Path(args.out).parent.parent}")
        other = _others_table(Path(args.out) / where[0] / where[1] / f"{src.stem}.json", prov)
        if other:
            raise BadInput(f"--out {args.out}: {where[0]}/{where[1]}/{src.stem}.json there is "
                           f"another run's table ({other}): give another --out")
        folder = runs.output_dir(Path(args.out) / where[0] / where[1], "--out")
    else:  # another table, another folder: the key of the JSON read
        key = hashlib.sha256(src.read_bytes()).hexdigest()[:8]
        folder = runs.report_folder(f"{where[0]}-{where[1]}-{src.stem}-{key}")
    try:
        written = report.write(doc, folder, src.stem, files)
        copy = folder / f"{src.stem}.json"  # the report beside what it was made from
        if not (copy.exists() and copy.resolve() == src.resolve()):
            copy.write_bytes(src.read_bytes())
            written.append(copy)
    except OSError as exc:
        raise BadInput(f"--render: cannot write into {folder} ({exc}); choose another --out") \
            from None
    print(f"written: {', '.join(str(w) for w in written)}")
    return 0


def _others_table(path: Path, prov: dict) -> str | None:
    """Where ``path`` holds a precision table of another run than the one of provenance
    ``prov`` (another commit, command or date): its commit and date; else None."""
    theirs = runs.read_json_dict(path) if path.is_file() else None
    their = (theirs or {}).get("provenance") if isinstance(theirs, dict) else None
    if not isinstance(their, dict):
        return None if theirs is None else "a file this version does not read as a table"
    keys = ("commit", "command", "date")
    if all(their.get(k) == prov.get(k) for k in keys):
        return None
    return f"commit {str(their.get('commit'))[:12]}, {their.get('date')}"


def _spec(args) -> tuple[dict, str]:
    if args.weights or args.inputs or args.calibration:
        if not (args.weights and args.inputs):
            raise BadInput("a user's model needs both --weights and --inputs")
        spec = {"weights": str(Path(args.weights).resolve()),
                "inputs": str(Path(args.inputs).resolve()),
                "calibration": str(Path(args.calibration).resolve()) if args.calibration else None,
                "plain_cell": PLAIN_CELLS[args.plain_cell]}
        return spec, args.name or "user-" + Path(args.weights).stem
    return {"model": str(network.shipped(args.model))}, args.name or shipped_name(args.model)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.render:
        return render(args)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise BadInput(f"unknown calibration method {', '.join(unknown) or '(none given)'} "
                       f"(choose from {', '.join(METHODS)})")
    spec, name = _spec(args)
    if name and not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise BadInput(f"--name {name!r}: use letters, digits, '-', '_' or '.'")
    load_source(spec)  # a bad file is one line and exit 2 before any GPU work
    out_root = Path(args.out) if args.out is not None else None
    if out_root is not None and out_root.exists() and not out_root.is_dir():
        raise BadInput(f"--out {out_root} is a file; give a folder")
    job = {"spec": spec, "reps": args.reps, "budget_s": args.budget, "methods": methods}
    worker, info = start_worker(args.cudnn, {"reps": args.reps, "time": True})
    try:
        if not info["device_stages"]:
            raise NoGPU(f"the precision table needs a CUDA GPU: {info['device'].get('reason')}")
        folder = _folder(out_root, info, job, name)
        writer_lock.hold(folder)  # one table at a time in a folder, refused before the GPU work
        said = warmup.warm("precision-" + runs.content_key(spec)[:8], info["device"],
                           rehearsals(job))
        if said:
            print(said, file=sys.stderr)
        result = worker.job(name_of(precision_table), job, timeout=args.timeout)
    finally:
        worker.close()
    if "records" not in result:
        print(f"cudnn_rnn.precision: the table was not made: {result.get('skipped')}",
              file=sys.stderr)
        return 1
    prov = provenance.collect(info["library"] | {"cublaslt": (result.get("cublaslt") or {})},
                              info["device"], provenance.command("cudnn_rnn.precision", argv))
    doc = {"summary": summarise(result), "result": result, "provenance": prov}
    stem = table_stem(name)
    (folder / f"{stem}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    written = report.write(doc, folder, stem)
    print(written[0].read_text())
    print(f"written: {folder / stem}.json, " + ", ".join(w.suffix for w in written))
    return 0 if doc["summary"]["rows"] else 1


REHEARSAL_SEQ = 16  # the table's work on 16 steps of its batches (the batch stays whole:
# the persistent kernel's partition, compiled into it, depends on the batch, not the length)


def rehearsals(job: dict) -> list:
    """The table's work on short sequences, one 8-bit format and part per process, cuDNN's
    families spread over them (one each: the CuPy kernels of a family's data type compile
    once, not in every process), no PERSIST_DYNAMIC row (its build compiles cuDNN's
    kernels, which no cache keeps), one calibration method (the methods differ in the
    thresholds the host searches for, not in the kernels) and the engines' FP16 rows in one
    only, one that runs no cuDNN family (the same kernels in every one: each launch
    shape's persistent kernel compiled six times over): CuPy's kernels and the persistent
    kernel's variants then compile side by side before the table
    (:mod:`cudnn_rnn.matrix.warmup`)."""
    from cudnn_rnn.lowbit import model
    small = dict(job, spec=dict(job["spec"], seq=REHEARSAL_SEQ), reps=1, budget_s=0.001,
                 dynamic=False, methods=tuple(job["methods"])[:1])
    plans = [(fmt, part) for fmt in model.FORMATS for part in model.PARTS]
    return [(name_of(precision_table), dict(small, formats=(fmt,), parts=(part,),
                                            families=FLOAT_FAMILIES[i:i + 1],
                                            rest=i == len(FLOAT_FAMILIES)))
            for i, (fmt, part) in enumerate(plans)]


def shipped_name(model: str) -> str:
    """The table name of a shipped model ("lstm" or "gru"): none for the LSTM."""
    return "" if model == "lstm" else model


def table_stem(name: str) -> str:
    """A table's file stem: ``precision``, or ``precision-NAME``."""
    return "precision" + (f"-{name}" if name else "")


def shipped_table(root: Path, model: str, gpu: str | None, cudnn_version) -> Path:
    """Where ``--out ROOT`` puts the table of the shipped ``model`` made on ``gpu`` with
    ``cudnn_version`` (``results`` for the committed ones)."""
    return (root / provenance.results_path(gpu, cudnn_version)
            / f"{table_stem(shipped_name(model))}.json")


def _folder(out_root: Path | None, info: dict, job: dict, name: str) -> Path:
    """Where the table goes: ``OUT/<gpu>/<cudnn version>/``, or by default this machine's
    run folder of this table (its model, settings and name: another table, another folder)."""
    if out_root is not None:
        return runs.output_dir(out_root / provenance.results_path(
            info["device"].get("gpu"), info["library"].get("cudnn_version")), "--out")
    machine = runs.machine_identity(info["library"], info["device"], info["device_stages"])
    key = runs.content_key([job, name, _content(job["spec"])])[:8]
    return runs.run_folder(runs.machine_dir(machine) / f"precision-{key}")


def _content(spec: dict) -> list:
    """SHA-256 of each file the table reads (a model retrained is another table)."""
    return [hashlib.sha256(Path(v).read_bytes()).hexdigest() if Path(v).is_file() else v
            for v in spec.values() if isinstance(v, str)]


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.precision")


if __name__ == "__main__":
    sys.exit(cli())
