"""The one loader of libcublasLt, and the checked functions it exposes.

:func:`load` finds the library in the order of :mod:`..finder`: an explicit path (the
``path`` argument), else ``$CUBLASLT_LIBRARY``; cuda-pathfinder
(``load_nvidia_dynamic_lib("cublasLt")``); the PyPI wheels (``nvidia/cublas/lib`` of
nvidia-cublas-cu12, ``nvidia/cu13/lib`` of the CUDA 13 wheels); the system sonames
``libcublasLt.so.13`` then ``.so.12``. It remembers which one it took and why each one
tried before failed. One libcublasLt per process: cuDNN's STANDARD algorithm loads one
too (cuDNN's loader asks cuda-pathfinder for it), and a second, different one would be a
second copy of the library's global state.

Functions returning ``cublasStatus_t`` raise the generated exception of
:mod:`.errors`, naming the call and carrying ``cublasLtGetStatusString``'s text. Loading
needs no GPU; ``cublasLtCreate`` then answers NOT_INITIALIZED.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from .. import finder
from ..bound import BoundLibrary, CheckedFunction
from ..finder import Candidate
from . import errors
from .prototypes import BY_NAME

WHEEL_PATTERNS = ("nvidia/cublas/lib/libcublasLt.so.*", "nvidia/cu13/lib/libcublasLt.so.*")
SONAMES = ("libcublasLt.so.13", "libcublasLt.so.12")
INSTALL_HINT = ("install cuBLAS (pip install 'cudnn-rnn[cuda12]', which brings nvidia-cublas-cu12) "
                "or point CUBLASLT_LIBRARY at libcublasLt.so.12 or .so.13")


def decode_version(raw: int) -> tuple[int, int, int]:
    """cublasLtGetVersion() → (major, minor, patch): major*10000 + minor*100 + patch."""
    return raw // 10000, raw % 10000 // 100, raw % 100


@dataclass
class Library(BoundLibrary):
    """A loaded libcublasLt: where it came from, what it is, and its functions."""

    PREFIX = "cublasLt"
    TITLE = "cuBLASLt"
    PROTOTYPES = BY_NAME

    @property
    def version(self) -> tuple[int, int, int]:
        return decode_version(self.version_raw)

    def describe(self) -> dict:
        """Provenance of the library, for reports."""
        return {"cublaslt_version": self.version_string, "cublaslt_version_raw": self.version_raw,
                "cublaslt_cudart_version": self.cudart_raw, "cublaslt_path": self.resolved_path,
                "cublaslt_source": self.source, "cublaslt_rejected": list(self.rejected)}

    def checked(self, name: str, raw) -> CheckedFunction:
        return CheckedFunction(name, raw, self.status_string, errors.error_for)

    def status_name(self, status: int) -> str:
        return self.raw("cublasLtGetStatusName")(status).decode()

    def status_string(self, status: int) -> str:
        return self.raw("cublasLtGetStatusString")(status).decode()


def _open(candidate: Candidate) -> Library:
    finder.check_file(candidate, errors.LibraryNotFound, "libcublasLt.so")
    try:
        cdll = ctypes.CDLL(candidate.path, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise errors.LibraryNotFound(f"cannot load {candidate.path} ({candidate.source}): "
                                     f"{finder.one_line(exc)}") from None
    if not hasattr(cdll, "cublasLtGetVersion"):
        raise errors.LibraryNotFound(f"{candidate.path} is not libcublasLt (no cublasLtGetVersion)")
    lib = Library(path=candidate.path, source=candidate.source, cdll=cdll)
    lib.version_raw = int(lib.raw("cublasLtGetVersion")())
    lib.cudart_raw = int(lib.raw("cublasLtGetCudartVersion")())
    if "/" not in candidate.path:  # a soname: record the file the dynamic linker chose
        lib.path = next(iter(finder.mapped_paths(candidate.path)), candidate.path)
    return lib


_LOADER = finder.OnePerProcess("libcublasLt", "CUBLASLT_LIBRARY", "cublasLt", WHEEL_PATTERNS,
                               SONAMES, _open, errors.LibraryNotFound, INSTALL_HINT)


def load(path: str | None = None) -> Library:
    """Load libcublasLt once per process (thread-safe) and return it; raises
    :class:`.errors.LibraryNotFound` with every candidate's failure and an install hint."""
    return _LOADER.load(path)


def loaded() -> Library | None:
    """The library already loaded in this process, if any (never loads)."""
    return _LOADER.lib
