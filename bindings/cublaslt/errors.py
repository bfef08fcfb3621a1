"""Exceptions generated from ``cublasStatus_t``: one class per status, naming the call.

``CublasLtError`` carries the C call that failed, the numeric status, its name and
cuBLASLt's own description of it (``cublasLtGetStatusString``)::

    try:
        lt.cublasLtCreate(ctypes.byref(handle))
    except errors.NotInitialized as e:   # no GPU: CUBLAS_STATUS_NOT_INITIALIZED (1)
        print(e.call, e.status_name, e.code, e.reason)
"""
from __future__ import annotations

from .enums import Status


class CublasLtError(RuntimeError):
    """A cuBLASLt call returned a status other than CUBLAS_STATUS_SUCCESS."""

    status_name: str = "UNKNOWN"

    def __init__(self, call: str, code: int, status_name: str | None = None,
                 reason: str | None = None):
        self.call, self.code, self.reason = call, int(code), reason
        if status_name:
            self.status_name = status_name
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.call} failed: CUBLAS_STATUS_{self.status_name} ({self.code})"
        return f"{text}: {self.reason}" if self.reason else text

    def __reduce__(self):  # picklable across worker processes
        return (error_for, (self.call, self.code, self.reason))


class LibraryNotFound(OSError):
    """No loadable libcublasLt was found (or the given path could not be loaded)."""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


ERROR_CLASSES: dict[str, type[CublasLtError]] = {
    m.name: type(_camel(m.name), (CublasLtError,), {"status_name": m.name, "__module__": __name__,
                                                    "__doc__": f"CUBLAS_STATUS_{m.name}"})
    for m in Status if m.value}
globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})


def error_for(call: str, code: int, reason: str | None = None) -> CublasLtError:
    """The exception for ``code`` as returned by ``call``; an unknown code keeps its number."""
    try:
        name = Status(code).name
    except ValueError:
        name = f"UNKNOWN_{code}"
    return ERROR_CLASSES.get(name, CublasLtError)(call, code, name, reason)
