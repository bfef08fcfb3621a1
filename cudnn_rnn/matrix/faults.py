"""Faults a test injects into a matrix worker (:mod:`.worker`).

``CUDNN_RNN_FAULT`` is a test hook that injects faults into the worker, each before or
inside the cell whose id contains TEXT: ``crash:TEXT`` (SIGSEGV), ``abort:TEXT``,
``hang:TEXT`` (sleep forever), ``raise:TEXT`` (an exception inside the cell's run),
``cuda:TEXT`` (a kernel that writes through a null pointer: a sticky CUDA error, on a GPU),
``exit:TEXT`` (the first worker exits between cells, before acknowledging TEXT), and
``slow:SECONDS`` (sleep before every cell).
"""
from __future__ import annotations

import os
import signal
import time

FAULT_ENV = "CUDNN_RNN_FAULT"


class InjectedFault(RuntimeError):
    """Raised inside a cell by ``CUDNN_RNN_FAULT=raise:TEXT`` (tests only)."""


KINDS = ("crash", "abort", "hang", "raise", "cuda", "exit", "slow")


def check_fault() -> None:
    """:class:`BadInput` for a ``CUDNN_RNN_FAULT`` the workers could not read (checked by
    the supervisor before any worker starts, so that none dies of it)."""
    from cudnn_rnn.matrix.errors import BadInput
    text = os.environ.get(FAULT_ENV, "")
    if not text:
        return
    kind, _, arg = text.partition(":")
    if kind not in KINDS or not arg:
        raise BadInput(f"{FAULT_ENV}={text!r}: a test hook of the form KIND:TEXT, KIND one of "
                       f"{', '.join(KINDS)}; unset it to run normally")
    if kind == "slow":
        try:
            seconds = float(arg)
        except ValueError:
            seconds = float("nan")
        if not 0 <= seconds < 3600:  # also false for NaN
            raise BadInput(f"{FAULT_ENV}={text!r}: slow takes seconds from 0 to 3600")


def fault(cell_id: str) -> tuple[str, str]:
    kind, _, arg = os.environ.get(FAULT_ENV, "").partition(":")
    if kind == "slow" and arg:
        time.sleep(float(arg))
        return "", ""
    return (kind, arg) if arg and arg in cell_id else ("", "")


def inject_process_fault(kind: str) -> None:
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "abort":
        os.abort()
    elif kind == "hang":
        while True:
            time.sleep(60)


def inject_cell_fault(kind: str, cupy) -> None:
    """Faults that happen inside the cell's run (and go through its error handling)."""
    if kind == "raise":
        raise InjectedFault("fault injected by CUDNN_RNN_FAULT")
    if kind == "cuda" and cupy is not None:
        kernel = cupy.RawKernel(r'''extern "C" __global__ void null_write(int v)
            { *((volatile int*)0) = v; }''', "null_write")
        kernel((1,), (1,), (1,))  # asynchronous: the error surfaces at the cell's next CUDA call
