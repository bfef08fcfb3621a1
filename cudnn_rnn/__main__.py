"""``cudnn-rnn COMMAND ...`` (or ``python -m cudnn_rnn COMMAND ...``): every command in one.

Each command is also its own module (``python -m cudnn_rnn.probe ...``); here the first
argument picks it and the rest go to it unchanged, so ``cudnn-rnn probe --help`` is
``python -m cudnn_rnn.probe --help``.
"""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "example": "NVIDIA's RNN_example, checked against the sample's golden checksums",
    "probe": "the support matrix of this GPU and this cuDNN",
    "report": "the report of recorded probe runs (and the difference of two)",
    "tune": "the fastest verified configuration of one shape",
    "bench": "the benchmark of probes/bench.toml against true FP32, TF32 and PyTorch",
    "overhead": "this project's ctypes path against torch.nn on the same configuration",
}
MODULES = {name: f"cudnn_rnn.{name}" for name in COMMANDS} | {
    "bench-report": "cudnn_rnn.bench_report"}
USAGE = "usage: cudnn-rnn COMMAND [ARGS...]   (cudnn-rnn COMMAND --help for its arguments)"


def cli(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("cudnn-rnn: error: name a command (see: cudnn-rnn --help)", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(USAGE + "\n\ncommands:")
        for name, what in COMMANDS.items():
            print(f"  {name:13s}{what}")
        print(f"  {'bench-report':13s}bench.md and bench.json from a benchmark's run folder")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in MODULES:
        print(f"cudnn-rnn: error: unknown command {name!r} (choose from "
              f"{', '.join(MODULES)}; see: cudnn-rnn --help)", file=sys.stderr)
        return 2
    module = importlib.import_module(MODULES[name])
    run = getattr(module, "cli", None) or module.main
    return run(rest)


if __name__ == "__main__":
    sys.exit(cli())
