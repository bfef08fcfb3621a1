"""``python -m cudnn_rnn.train --out cudnn_rnn/data/charlm`` (``make model``): the shipped models.

Trains a character-level LSTM and GRU language model on this interpreter's standard
library (:mod:`cudnn_rnn.charlm.corpus`: training files only) with cuDNN's forward and
backward calls (:mod:`cudnn_rnn.charlm.train`), and writes into ``--out``:

* ``lstm.npz``, ``gru.npz``: the weights with PyTorch's state_dict names, and in ``meta``
  the held-out bits per character and top-1 accuracy of the float64 reference, the
  training settings and the provenance;
* ``heldout.txt``: the held-out slice (``EVAL_BATCH`` stretches of ``EVAL_SEQ + 1``
  characters, evenly spaced through the held-out files), which the precision table and
  its tests read; ``calibration.txt``: a slice of the *training* text for calibration;
* ``lstm-training.log``, ``gru-training.log``: the command, provenance, and one line per
  ``--log-every`` steps.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from cudnn_rnn import bindings
from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.bindings.errors import CudnnError
from cudnn_rnn.charlm import corpus, network
from cudnn_rnn.charlm.network import EVAL_BATCH, EVAL_SEQ
from cudnn_rnn.charlm.train import TrainingFailed, config, train
from cudnn_rnn.cli import BadInput, OneLineParser, positive_float, positive_int, run_main
from cudnn_rnn.engine.gpu import cupy_or_raise, device_info
from cudnn_rnn.matrix import provenance

CELLS = {"lstm": RNNMode.LSTM, "gru": RNNMode.GRU}
CALIBRATION_BATCH = 64


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.train", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for the models, slices and logs")
    p.add_argument("--cell", choices=[*CELLS, "all"], default="all")
    p.add_argument("--layers", type=positive_int, default=2)
    p.add_argument("--hidden", type=positive_int, default=256)
    p.add_argument("--embed", type=positive_int, default=64)
    p.add_argument("--seq", type=positive_int, default=128)
    p.add_argument("--batch", type=positive_int, default=128)
    p.add_argument("--steps", type=positive_int, default=4000)
    p.add_argument("--lr", type=positive_float, default=3e-3)
    p.add_argument("--clip", type=positive_float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=positive_int, default=100)
    return p


def stretches(text: str, count: int, length: int) -> str:
    """``count`` stretches of ``length`` characters evenly spaced through ``text``."""
    step = (len(text) - length) // max(count - 1, 1)
    if step < 0 or len(text) < count * length:
        raise ValueError(f"{count} stretches of {length} characters need more than the "
                         f"{len(text)} characters of text")
    return "".join(text[i * step:i * step + length] for i in range(count))


def _provenance(command: str) -> dict:
    return provenance.collect(bindings.load().describe(), device_info(), command)


def _writable(out: Path) -> None:
    """:class:`BadInput` unless ``out`` (or the folder it would be made in) can be written:
    said before the training, not after it."""
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"--out {out}: {existing} is not writable; give a writable folder")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} is a file; give a folder")
    _writable(out)
    names = CELLS if args.cell == "all" else [args.cell]
    for name in names:  # the sizes, before any GPU work
        try:
            config(CELLS[name], args.layers, args.hidden, args.embed, args.seq, args.batch)
        except ValueError as exc:
            raise BadInput(f"{name}: {exc}; choose smaller --layers, --hidden, --embed, --seq "
                           "or --batch") from None
    cp = cupy_or_raise("training")
    try:
        text = corpus.load()
        heldout = stretches(text.heldout, EVAL_BATCH, EVAL_SEQ + 1)
        calibration = stretches(text.train, CALIBRATION_BATCH, EVAL_SEQ + 1)
    except ValueError as exc:
        raise BadInput(f"this interpreter's standard library cannot be the corpus: {exc}") from None
    cmd = provenance.command("cudnn_rnn.train", argv)
    made = {}
    for name in names:
        try:
            made[name] = _train_one(cp, name, args, text, heldout, cmd)
        except Exception as exc:  # noqa: BLE001 - reported in one line, nothing written
            if not isinstance(exc, (TrainingFailed, CudnnError, cp.cuda.memory.OutOfMemoryError)):
                raise
            print(f"cudnn_rnn.train: {name} did not train: {exc}; nothing was written",
                  file=sys.stderr)
            return 1
    # every cell trained: only now replace what the folder holds
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "heldout.txt").write_text(heldout, encoding="utf-8")
        (out / "calibration.txt").write_text(calibration, encoding="utf-8")
        for name, (model, lines) in made.items():
            (out / f"{name}-training.log").write_text("".join(line + "\n" for line in lines))
            model.save(out / f"{name}.npz")
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write the trained models ({exc}); give a "
                       "writable folder") from None
    print(f"written: {', '.join(sorted(p.name for p in out.iterdir()))} in {out}")
    return 0


def _train_one(cp, name: str, args, text, heldout: str, cmd: str) -> tuple:
    """One cell trained and evaluated: (the model with its meta, the log's lines)."""
    inputs, targets = corpus.batch(corpus.encode(heldout), EVAL_SEQ, EVAL_BATCH)
    prov = _provenance(cmd)
    settings = {k: getattr(args, k) for k in ("layers", "hidden", "embed", "seq", "batch",
                                              "steps", "lr", "clip", "seed")}
    lines = []

    def emit(row):
        lines.append(json.dumps(row))
        print(f"{name}: {lines[-1]}", flush=True)

    emit({"command": cmd, "cell": name, "settings": settings, "corpus": text.describe(),
          "provenance": prov})
    started = time.monotonic()
    model, rows = train(CELLS[name], corpus.encode(text.train), vocab=len(corpus.VOCAB),
                        log=emit, log_every=args.log_every, **settings)
    seconds = round(time.monotonic() - started, 2)
    held = network.evaluate(network.reference_logits(model, inputs, cp), cp.asarray(targets))
    held.update(seq=EVAL_SEQ, batch=EVAL_BATCH, slice="heldout.txt",
                reference="cudnn_rnn.check.reference.forward, float64, on the GPU")
    emit({"trained_s": seconds, "heldout": held})
    model.meta = {"cell": name, "vocab": corpus.VOCAB, "settings": settings,
                  "training": {"seconds": seconds, "first": rows[0], "last": rows[-1],
                               "log": f"{name}-training.log"},
                  "corpus": text.describe(), "heldout": held, "provenance": prov}
    return model, lines


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.train")


if __name__ == "__main__":
    sys.exit(cli())
