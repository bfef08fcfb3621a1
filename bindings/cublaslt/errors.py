"""Exceptions generated from ``cublasStatus_t``: one class per status, naming the call.

``CublasLtError`` carries the C call that failed, the numeric status, its name and
cuBLASLt's own description of it (``cublasLtGetStatusString``)::

    try:
        lt.cublasLtCreate(ctypes.byref(handle))
    except errors.NotInitialized as e:   # no GPU: CUBLAS_STATUS_NOT_INITIALIZED (1)
        print(e.call, e.status_name, e.code, e.reason)
"""
from __future__ import annotations

from ..statuses import StatusError, camel, generate, lookup
from .enums import Status


class CublasLtError(StatusError):
    """A cuBLASLt call returned a status other than CUBLAS_STATUS_SUCCESS."""

    C_PREFIX = "CUBLAS_STATUS_"


class LibraryNotFound(OSError):
    """No loadable libcublasLt was found (or the given path could not be loaded)."""


ERROR_CLASSES: dict[str, type[CublasLtError]] = generate(CublasLtError, Status, globals(), camel)


def error_for(call: str, code: int, reason: str | None = None) -> CublasLtError:
    """The exception for ``code`` as returned by ``call``; an unknown code keeps its number."""
    return lookup(ERROR_CLASSES, CublasLtError, Status, call, code, reason, "UNKNOWN_")
