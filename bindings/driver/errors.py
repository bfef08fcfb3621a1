"""Exceptions generated from ``CUresult``: one class per result, naming the call.

``DriverError`` carries the C call that failed, the numeric result, its name and the
driver's own description of it (``cuGetErrorString``)::

    try:
        drv.cuOccupancyMaxActiveClusters(ctypes.byref(n), fn, ctypes.byref(config))
    except errors.InvalidClusterSize as e:   # CUDA_ERROR_INVALID_CLUSTER_SIZE (912)
        print(e.call, e.status_name, e.code, e.reason)

Class names drop the ``ERROR_`` of the C names (``CUDA_ERROR_NOT_PERMITTED`` is
:class:`NotPermitted`).
"""
from __future__ import annotations

from .enums import Result


class DriverError(RuntimeError):
    """A CUDA driver API call returned a result other than CUDA_SUCCESS."""

    status_name: str = "UNKNOWN"

    def __init__(self, call: str, code: int, status_name: str | None = None,
                 reason: str | None = None):
        self.call, self.code, self.reason = call, int(code), reason
        if status_name:
            self.status_name = status_name
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.call} failed: CUDA_{self.status_name} ({self.code})"
        return f"{text}: {self.reason}" if self.reason else text

    def __reduce__(self):  # picklable across worker processes
        return (error_for, (self.call, self.code, self.reason))


class LibraryNotFound(OSError):
    """No loadable libcuda (the NVIDIA driver's CUDA library) was found."""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.removeprefix("ERROR_").split("_"))


ERROR_CLASSES: dict[str, type[DriverError]] = {
    m.name: type(_camel(m.name), (DriverError,), {"status_name": m.name, "__module__": __name__,
                                                  "__doc__": f"CUDA_{m.name}"})
    for m in Result if m.value}
globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})


def error_for(call: str, code: int, reason: str | None = None) -> DriverError:
    """The exception for ``code`` as returned by ``call``; an unknown code keeps its number."""
    try:
        name = Result(code).name
    except ValueError:
        name = f"ERROR_UNKNOWN_{code}"
    return ERROR_CLASSES.get(name, DriverError)(call, code, name, reason)
