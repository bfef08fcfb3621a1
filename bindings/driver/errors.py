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

from ..statuses import StatusError, camel, generate, lookup
from .enums import Result


class DriverError(StatusError):
    """A CUDA driver API call returned a result other than CUDA_SUCCESS."""

    C_PREFIX = "CUDA_"


class LibraryNotFound(OSError):
    """No loadable libcuda (the NVIDIA driver's CUDA library) was found."""


ERROR_CLASSES: dict[str, type[DriverError]] = generate(
    DriverError, Result, globals(), lambda name: camel(name.removeprefix("ERROR_")))


def error_for(call: str, code: int, reason: str | None = None) -> DriverError:
    """The exception for ``code`` as returned by ``call``; an unknown code keeps its number."""
    # not ERROR_UNKNOWN_<n>: CUDA_ERROR_UNKNOWN (999) is a result of its own
    return lookup(ERROR_CLASSES, DriverError, Result, call, code, reason, "UNRECOGNIZED_RESULT_")
