"""Shared command-line behaviour: one-line errors, exit code 2 for bad input, no tracebacks."""
from __future__ import annotations

import argparse
import math
import os
import sys

from cudnn_rnn.bindings import errors
from cudnn_rnn.bindings.library import INSTALL_HINT
from cudnn_rnn.engine import gpu
from cudnn_rnn.matrix.errors import BadInput
from cudnn_rnn.matrix.worker import WorkerStartFailed

__all__ = ["BadInput", "OneLineParser", "enum_arg", "positive_float", "positive_int", "run_main"]
EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports errors in one line with a pointer to --help."""

    def error(self, message):  # noqa: D401 - argparse API
        raise BadInput(message)


class Once(argparse.Action):
    """An option that keeps a comma-separated list: given twice, it is refused (argparse
    would keep the last silently: --cell LSTM --cell GRU would probe GRU alone)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice: give one comma-separated list "
                         f"({option_string} A,B)")
        setattr(namespace, self.dest, values)


def enum_arg(enum_cls):
    """An argparse ``type`` that parses a cuDNN enum name (with or without prefix)."""
    def convert(text):
        try:
            return enum_cls.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = enum_cls.__name__
    return convert


def positive_int(text):
    """An argparse ``type`` for sizes and counts."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text):
    """An argparse ``type`` for seconds and budgets: a finite number above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number, got {text!r}")
    return value


# where the library the user named (--cudnn, CUDNN_LIBRARY) is not one: what to name instead
NAMED_HINT = ("name a libcudnn.so.9 that exists and loads (--cudnn or CUDNN_LIBRARY), or leave "
              "both unset to load the installed one")

# how a command was called where it was not ``python -m MODULE``: the module's name to the
# words the user typed (``cudnn-rnn probe``), so that a hint repeats them
CALLED_AS: dict = {}


def stdout_closed() -> int:
    """What a command does where its reader has gone (``| head``): stdout to /dev/null, so
    that Python's flush at exit does not raise again; exit 0, nothing said."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def run_main(main, argv=None, prog: str = "cudnn_rnn") -> int:
    """Call ``main(argv)``; turn expected failures into one line on stderr and exit 2 (each
    line opens with the command as the user called it: ``cudnn-rnn probe`` or the module)."""
    called = CALLED_AS.get(prog)
    command = called or f"python -m {prog}"
    prog = called or prog
    try:
        return int(main(argv) or 0)
    except BadInput as exc:
        print(f"{prog}: error: {exc} (see: {command} --help)", file=sys.stderr)
    except errors.LibraryNotFound as exc:
        text = str(exc)
        named = "(explicit)" in text or "(env CUDNN_LIBRARY)" in text  # the user's own path
        text = text.replace("(explicit)", "(the library named)")
        hint = NAMED_HINT if named else INSTALL_HINT
        print(f"{prog}: error: {text}" + ("" if hint in text else f"; to fix: {hint}"),
              file=sys.stderr)
    except WorkerStartFailed as exc:
        print(f"{prog}: error: the worker process could not run: {exc}", file=sys.stderr)
    except gpu.NoGPU as exc:
        print(f"{prog}: error: {exc}; the descriptor stages run without one "
              f"(python -m cudnn_rnn.probe)", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return stdout_closed()
    return EXIT_BAD_INPUT

