"""Capture of cuDNN's own log messages, so a rejected call carries its reason.

cuDNN reports *why* it rejected a call only through its logging layer, e.g.
``Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: mathPrec != CUDNN_DATA_FLOAT``.
``cudnnSetCallback`` routes that layer to a function of ours without any
environment variable. The callback runs synchronously in the thread that made
the failing call, so messages are collected per thread and taken by the checker
right after the call returns.

The ``msg`` argument is not one C string: its lines are separated by NUL bytes
and the message ends with an empty line, so it is read line by line.
"""
from __future__ import annotations

import ctypes
import re
import threading

from . import ctypes_types as T

_local = threading.local()
_REASON = re.compile(r"Reason:\s*(.*)$")


def _lines(msg_ptr: int, limit: int = 64) -> list[str]:
    out: list[str] = []
    offset = 0
    while msg_ptr and len(out) < limit:
        line = ctypes.string_at(msg_ptr + offset)
        if not line:
            break
        out.append(line.decode("utf-8", "replace"))
        offset += len(line) + 1
    return out


def _on_message(severity, _udata, dbg, msg):  # pragma: no cover - called from C
    try:
        status = dbg.contents.cudnnStatus if dbg else 0
        bucket = getattr(_local, "messages", None)
        if bucket is None:
            bucket = _local.messages = []
        bucket.append((int(severity), int(status), tuple(_lines(msg))))
    except Exception:  # never let an exception cross back into C
        pass


CALLBACK = T.cudnnCallback_t(_on_message)  # kept alive for the life of the process


def begin() -> None:
    """Forget messages from earlier calls on this thread."""
    _local.messages = []


def take() -> list[tuple[int, int, tuple[str, ...]]]:
    """Messages logged on this thread since :func:`begin`."""
    messages = getattr(_local, "messages", None) or []
    _local.messages = []
    return messages


def reasons(messages) -> list[str]:
    """The ``Reason:`` texts in captured messages, in order, without repeats."""
    found: list[str] = []
    for _sev, _status, lines in messages:
        for line in lines:
            m = _REASON.search(line)
            if m and m.group(1).strip() and m.group(1).strip() not in found:
                found.append(m.group(1).strip())
    return found


def last_error_seen() -> str:
    """The cudnnGetLastErrorString text this thread read after its latest failing call."""
    return getattr(_local, "last_error", "")


def set_last_error_seen(text: str) -> None:
    _local.last_error = text
