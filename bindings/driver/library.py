"""The one loader of libcuda (the NVIDIA driver's CUDA library), and its checked functions.

The driver is not a wheel: it comes with the NVIDIA kernel driver, so :func:`load` tries
an explicit path (the ``path`` argument, else ``$CUDA_DRIVER_LIBRARY``), else the system
soname ``libcuda.so.1`` (which the dynamic linker resolves as CuPy's does: one copy per
process). No driver, no such file: :class:`.errors.LibraryNotFound` then says "no NVIDIA
driver found", which is the true reason on a machine without a GPU (CUDA's runtime says
"driver version is insufficient" there). Loading needs no GPU; the calls need
``cuInit`` and a device, except ``cuDriverGetVersion`` and the two error-text calls.

Functions returning ``CUresult`` raise the generated exception of :mod:`.errors`, naming
the call and carrying ``cuGetErrorString``'s text.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from .. import finder
from ..bound import BoundLibrary, CheckedFunction
from ..finder import Candidate
from . import errors
from .prototypes import BY_NAME

SONAME = "libcuda.so.1"
ENV = "CUDA_DRIVER_LIBRARY"
INSTALL_HINT = ("install the NVIDIA driver (its libcuda.so.1), or point CUDA_DRIVER_LIBRARY "
                "at the driver's libcuda.so.1")


def decode_version(raw: int) -> tuple[int, int, int]:
    """cuDriverGetVersion's number → (major, minor, 0): major*1000 + minor*10 (12090: 12.9)."""
    return raw // 1000, raw % 1000 // 10, 0


@dataclass
class Library(BoundLibrary):
    """A loaded libcuda: where it came from, the CUDA version its driver supports, and its
    functions."""

    PREFIX = "cu"
    TITLE = "the CUDA driver"
    PROTOTYPES = BY_NAME

    @property
    def version(self) -> tuple[int, int, int]:
        return decode_version(self.version_raw)

    def describe(self) -> dict:
        """Provenance of the library, for reports."""
        return {"driver_cuda_version": self.version_string, "driver_cuda_version_raw":
                self.version_raw, "driver_library_path": self.resolved_path,
                "driver_library_source": self.source}

    def checked(self, name: str, raw) -> CheckedFunction:
        return CheckedFunction(name, raw, self.status_string, errors.error_for)

    def _text(self, fn: str, status: int) -> str | None:
        out = ctypes.c_char_p()
        if self.raw(fn)(status, ctypes.byref(out)) or not out.value:
            return None  # a code this driver does not know
        return out.value.decode()

    def status_name(self, status: int) -> str | None:
        return self._text("cuGetErrorName", status)

    def status_string(self, status: int) -> str | None:
        return self._text("cuGetErrorString", status)


def _open(candidate: Candidate) -> Library:
    finder.check_file(candidate, errors.LibraryNotFound, SONAME)
    try:
        cdll = ctypes.CDLL(candidate.path)
    except OSError as exc:
        raise errors.LibraryNotFound(f"{candidate.path} ({candidate.source}) cannot be "
                                     f"loaded: {finder.one_line(exc)}") from None
    if not hasattr(cdll, "cuDriverGetVersion"):
        raise errors.LibraryNotFound(f"{candidate.path} is not libcuda (no cuDriverGetVersion)")
    lib = Library(path=candidate.path, source=candidate.source, cdll=cdll)
    raw = ctypes.c_int(0)
    try:
        lib.cuDriverGetVersion(ctypes.byref(raw))
    except errors.DriverError as exc:  # the toolkit's stub answers STUB_LIBRARY to every call
        raise errors.LibraryNotFound(f"{candidate.path} ({candidate.source}) is not a working "
                                     f"driver: {exc}") from None
    lib.version_raw = raw.value
    mapped = {os.path.realpath(m) for m in finder.mapped_paths("libcuda.so")}
    others = sorted(mapped - {os.path.realpath(candidate.path)})
    if len(mapped) > 1:  # CuPy's (the dynamic linker's) and this one: two drivers' state
        raise errors.LibraryNotFound(f"{candidate.path} ({candidate.source}) is a second libcuda "
                                     f"in this process beside {(others or sorted(mapped))[0]}: "
                                     f"point {ENV} at the one the dynamic linker loads, or "
                                     f"unset it")
    if "/" not in candidate.path:  # a soname: record the file the dynamic linker chose
        lib.path = next(iter(mapped), candidate.path)
    return lib


# No wheel ships the driver, and cuda-pathfinder is not asked (libname None): the toolkit's
# stubs/libcuda.so it might offer loads, and answers CUDA_ERROR_STUB_LIBRARY to every call.
_LOADER = finder.OnePerProcess("NVIDIA driver", ENV, None, (), (SONAME,), _open,
                               errors.LibraryNotFound, INSTALL_HINT)


def load(path: str | None = None) -> Library:
    """Load libcuda once per process (thread-safe) and return it; raises
    :class:`.errors.LibraryNotFound` saying no driver was found, with the install hint."""
    return _LOADER.load(path)


def loaded() -> Library | None:
    """The library already loaded in this process, if any (never loads)."""
    return _LOADER.lib
