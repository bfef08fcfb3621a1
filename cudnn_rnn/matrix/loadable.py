"""Whether a cuDNN library a user named can be loaded at all: a libcudnn.so.9 without its
sub-libraries aborts inside cuDNN, a truncated one faults while it is mapped, and either
ends the process that loads it without a word of ours. Tried in a child process first
(:func:`library_survives`), and said in one line."""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

from cudnn_rnn.matrix.errors import BadInput

ADVICE = ("name a libcudnn.so.9 whose sub-libraries (libcudnn_ops, libcudnn_engines_*, ...) "
          "lie beside it, or leave --cudnn and CUDNN_LIBRARY unset to load the installed one")


def signal_name(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


TRIAL_S = 120.0
# the signals a library's own fault ends its loader with (not SIGKILL or SIGTERM: those come
# from outside, such as the out-of-memory killer)
FAULTS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}
LOAD_TRIAL = "import sys; from cudnn_rnn import bindings; bindings.load(sys.argv[1] or None)"


def library_survives(path: str | None) -> None:
    """:class:`BadInput` when loading the cuDNN a user named (``path``, else
    ``$CUDNN_LIBRARY``) ends a child process by a signal. A load that fails with an error
    is left to the caller's own load, which says why; nothing is tried when none is named."""
    named = path or os.environ.get("CUDNN_LIBRARY")
    if named:
        _tried(path, named)


@functools.lru_cache(maxsize=None)  # once a process: each command's check, then its worker's
def _tried(path: str | None, named: str) -> None:
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        proc = subprocess.run([sys.executable, "-c", LOAD_TRIAL, path or ""], env=env,
                              capture_output=True, timeout=TRIAL_S)
    except subprocess.TimeoutExpired:
        raise BadInput(f"loading {named} took more than {TRIAL_S:.0f} s in a trial process; "
                       f"{ADVICE}") from None
    if -proc.returncode in FAULTS:  # a fault of the library, not a kill from outside
        raise BadInput(f"loading {named} ended the process ({signal_name(proc.returncode)}): "
                       f"{ADVICE}")
