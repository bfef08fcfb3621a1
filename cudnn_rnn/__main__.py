"""``cudnn-rnn COMMAND ...`` (or ``python -m cudnn_rnn COMMAND ...``): every command in one.

Each command is also its own module (``python -m cudnn_rnn.probe ...``); here the first
argument picks it and the rest go to it unchanged, so ``cudnn-rnn probe --help`` is
``python -m cudnn_rnn.probe --help``.
"""
from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {  # name: (module, what it does)
    "example": ("cudnn_rnn.example",
                "NVIDIA's RNN_example, checked against the sample's golden checksums"),
    "probe": ("cudnn_rnn.probe", "the support matrix of this GPU and this cuDNN"),
    "report": ("cudnn_rnn.report",
               "the report of recorded probe runs (and the difference of two)"),
    "tune": ("cudnn_rnn.tune", "the fastest verified configuration of one shape"),
    "bench": ("cudnn_rnn.bench",
              "the benchmark of probes/bench.toml against true FP32, TF32 and PyTorch"),
    "overhead": ("cudnn_rnn.overhead",
                 "this project's ctypes path against torch.nn on the same configuration"),
    "bench-report": ("cudnn_rnn.bench_report",
                     "bench.md and bench.json from a benchmark's run folder"),
    "train": ("cudnn_rnn.train",
              "the shipped character models, trained with cuDNN's training calls"),
    "precision": ("cudnn_rnn.precision",
                  "time and accuracy of a trained RNN in every precision, calibrated"),
}
MODULES = {name: module for name, (module, _what) in COMMANDS.items()}
USAGE = "usage: cudnn-rnn COMMAND [ARGS...]   (cudnn-rnn COMMAND --help for its arguments)"


def cli(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("cudnn-rnn: error: name a command (see: cudnn-rnn --help)", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        try:
            print(USAGE + "\n\ncommands:")
            for name, (_module, what) in COMMANDS.items():
                print(f"  {name:13s}{what}")
            sys.stdout.flush()
        except BrokenPipeError:  # cudnn-rnn --help | head: as cli.stdout_closed, without
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # its imports
            return 0
        return 0
    name, rest = argv[0], argv[1:]
    name = name.replace("_", "-")  # as the module is named: bench_report is bench-report
    if name not in MODULES:
        print(f"cudnn-rnn: error: unknown command {name!r} (choose from "
              f"{', '.join(MODULES)}; see: cudnn-rnn --help)", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(MODULES[name])
    except ModuleNotFoundError as exc:  # a package this project installs is not here
        print(f"cudnn-rnn: error: this Python ({sys.executable}) lacks {exc.name}: install the "
              "project into it (pip install -e '.[cuda12]', or make install for .venv)",
              file=sys.stderr)
        return 2
    from cudnn_rnn import cli as common  # a hint of the command's says cudnn-rnn NAME
    common.CALLED_AS[MODULES[name]] = f"cudnn-rnn {name}"
    return module.cli(rest)


if __name__ == "__main__":
    sys.exit(cli())
