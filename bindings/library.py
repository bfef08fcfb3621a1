"""The one loader of libcudnn, and the checked functions it exposes.

:func:`load` finds the library in this order and remembers how:

1. an explicit path (the ``path`` argument), else ``$CUDNN_LIBRARY``;
2. cuda-pathfinder (``load_nvidia_dynamic_lib("cudnn")``), which also loads the
   cuBLASLt the STANDARD algorithm needs;
3. ``nvidia/cudnn/lib/libcudnn.so.*`` under any ``sys.path`` entry (the PyPI wheels);
4. the system sonames ``libcudnn.so.9`` then ``libcudnn.so.8``.

cuDNN 9's ``libcudnn.so.9`` is a small dispatcher that ``dlopen``s its
sub-libraries by soname. Those are preloaded from the same directory first, so
the dispatcher cannot pick up another installation's ``libcudnn_adv`` (which
would end in SUBLIBRARY_VERSION_MISMATCH). Only one libcudnn can live in a
process; asking for a second, different one raises :class:`LibraryNotFound`.

Functions are bound lazily from :mod:`.prototypes`. Those that return
``cudnnStatus_t`` are wrapped by one checker that raises the generated
exception naming the call, with cuDNN's logged reason attached.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from . import enums, errors, finder, logcapture
from .bound import BoundLibrary
from .finder import Candidate
from .prototypes import BY_NAME, LEGACY_SYMBOLS

SUBLIBRARY_ORDER = ("libcudnn_graph", "libcudnn_ops", "libcudnn_adv")


def decode_version(raw: int) -> tuple[int, int, int]:
    """cudnnGetVersion() → (major, minor, patch): ×10000 from 9.0 on, ×1000 before."""
    if raw >= 90000:
        return raw // 10000, raw % 10000 // 100, raw % 100
    return raw // 1000, raw % 1000 // 100, raw % 100


def decode_cuda_version(raw: int) -> tuple[int, int]:
    """A CUDA version number such as 12090 → (12, 9)."""
    return raw // 1000, raw % 1000 // 10


WHEEL_PATTERNS = ("nvidia/cudnn/lib/libcudnn.so.*",)


def _preload_siblings(shim: str) -> None:
    """dlopen the sub-libraries beside ``shim`` (RTLD_GLOBAL) so sonames resolve to them
    (which ones did is in :meth:`Library.describe`, from the process's mappings).

    Only a file named like the dispatcher (``libcudnn.so`` or ``libcudnn.so.N...``) has
    siblings; any other name preloads nothing and is left to :func:`_open`'s checks."""
    name = Path(shim).name
    if not name.startswith("libcudnn.so"):
        return
    directory = Path(shim).resolve().parent
    suffix = name[len("libcudnn.so"):]  # ".9", ".9.19.0" or ""
    for stem in SUBLIBRARY_ORDER:
        candidate = directory / f"{stem}.so{suffix}"
        if candidate.is_file():
            ctypes.CDLL(str(candidate), mode=ctypes.RTLD_GLOBAL)


def _preload_cublaslt() -> str | None:
    """Best effort: the STANDARD algorithm dlopens cuBLASLt at run time."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib  # optional: may not be installed
        return load_nvidia_dynamic_lib("cublasLt").abs_path
    except Exception:
        return None


def mapped_paths(prefix: str = "libcudnn") -> list[str]:
    """:func:`.finder.mapped_paths`, for libcudnn unless told otherwise."""
    return finder.mapped_paths(prefix)


def mapped_objects(prefix: str = "libcudnn") -> dict[str, str]:
    """:func:`mapped_paths` by file name (the first path of each name)."""
    objects: dict[str, str] = {}
    for p in mapped_paths(prefix):
        objects.setdefault(Path(p).name, p)
    return objects


class LoggedFunction:
    """A bound cuDNN function that raises on a non-SUCCESS status, with the reason cuDNN's
    log gave for it (the cuBLASLt and driver mirrors' :class:`~.bound.CheckedFunction` has
    no log to read)."""

    __slots__ = ("name", "raw", "_version", "_last_error")

    def __init__(self, name: str, raw, version: int, last_error):
        self.name = name
        self.raw = raw
        self._version = version
        self._last_error = last_error

    def __call__(self, *args) -> None:
        logcapture.begin()
        status = self.raw(*args)
        if status:
            raise self.error(status)
        logcapture.take()

    def error(self, status: int) -> errors.CudnnError:
        messages = logcapture.take()
        found = logcapture.reasons(messages)
        if self._last_error is not None:
            # cudnnGetLastErrorString keeps its text until the next *error*, so text equal to
            # what an earlier failure already read is stale and says nothing about this call.
            text = self._last_error()
            if not found and text and text != logcapture.last_error_seen():
                found = [text]
            logcapture.set_last_error_seen(text)
        log = tuple(line for _s, _c, lines in messages for line in lines)
        return errors.error_for(self.name, status, self._version,
                                "; ".join(found) if found else None, log)


@dataclass
class Library(BoundLibrary):
    """A loaded libcudnn: where it came from, what it is, and its functions."""

    cublaslt: str | None = None  # the libcublasLt preloaded for the STANDARD algorithm

    PREFIX = "cudnn"
    TITLE = "cuDNN"
    PROTOTYPES = BY_NAME
    MISSING = errors.MissingSymbol

    # --- identity -----------------------------------------------------------------------
    @property
    def version(self) -> tuple[int, int, int]:
        return decode_version(self.version_raw)

    @property
    def version_number(self) -> int:
        """Normalised to the cuDNN 9 scheme (major*10000 + minor*100 + patch)."""
        major, minor, patch = self.version
        return major * 10000 + minor * 100 + patch

    @property
    def cudart_version(self) -> tuple[int, int]:
        return decode_cuda_version(self.cudart_raw)

    @property
    def status_enum(self) -> type[enums.CEnum]:
        return enums.status_enum(self.version_number)

    def symbol_report(self) -> dict[str, dict[str, bool]]:
        """Which declared and which legacy symbols this library exports."""
        return {
            "declared": {name: self.has_symbol(name) for name in BY_NAME},
            "legacy": {name: self.has_symbol(name) for name in LEGACY_SYMBOLS},
        }

    def describe(self) -> dict:
        """Provenance of the library, for reports and banners."""
        objects = mapped_objects()
        dirs = {str(Path(p).parent) for p in objects.values()}
        return {
            "cudnn_version": self.version_string,
            "cudnn_version_raw": self.version_raw,
            "cudart_version": "%d.%d" % self.cudart_version,
            "library_path": self.resolved_path,
            "library_source": self.source,
            "library_rejected": list(self.rejected),  # why each candidate before it failed
            "sublibraries": objects,
            "sublibraries_mixed": len(dirs) > 1,
            "cublaslt": self.cublaslt,
        }

    # --- functions ----------------------------------------------------------------------
    def checked(self, name: str, raw) -> LoggedFunction:
        return LoggedFunction(name, raw, self.version_number, self.last_error_string)

    def error_string(self, status: int) -> str:
        return self.raw("cudnnGetErrorString")(status).decode()

    def last_error_string(self) -> str:
        """cudnnGetLastErrorString (cuDNN 9); empty where the library lacks it."""
        if not self.has_symbol("cudnnGetLastErrorString"):
            return ""
        buf = ctypes.create_string_buffer(2048)
        self.raw("cudnnGetLastErrorString")(buf, len(buf))
        return buf.value.decode("utf-8", "replace").strip()


def _open(candidate: Candidate) -> Library:
    finder.check_file(candidate, errors.LibraryNotFound, "libcudnn.so.9")
    try:
        if "/" in candidate.path:
            _preload_siblings(candidate.path)
        cdll = ctypes.CDLL(candidate.path, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise errors.LibraryNotFound(f"cannot load {candidate.path} ({candidate.source}): "
                                     f"{finder.one_line(exc)}") from None
    try:
        getattr(cdll, "cudnnGetVersion")
    except AttributeError:
        raise errors.LibraryNotFound(f"{candidate.path} is not libcudnn (no cudnnGetVersion)") \
            from None
    lib = Library(path=candidate.path, source=candidate.source, cdll=cdll)
    lib.version_raw = int(lib.raw("cudnnGetVersion")())
    lib.cudart_raw = int(lib.raw("cudnnGetCudartVersion")())
    if "/" not in candidate.path:  # a soname: record the file the dynamic linker chose
        objects = mapped_objects()
        lib.path = objects.get(candidate.path, candidate.path)
    lib.cublaslt = _preload_cublaslt()
    mask = enums.SEV_ERROR_EN | enums.SEV_WARNING_EN
    lib.cudnnSetCallback(mask, None, logcapture.CALLBACK)  # checked: reasons depend on it
    return lib


INSTALL_HINT = ("install the cuDNN wheel (pip install 'cudnn-rnn[cuda12]', or nvidia-cudnn-cu12 / "
                "nvidia-cudnn-cu13) or point CUDNN_LIBRARY (--cudnn) at libcudnn.so.9")


_LOADER = finder.OnePerProcess("libcudnn", "CUDNN_LIBRARY", "cudnn", WHEEL_PATTERNS,
                               ("libcudnn.so.9", "libcudnn.so.8"), _open, errors.LibraryNotFound,
                               INSTALL_HINT)


def load(path: str | None = None) -> Library:
    """Load libcudnn once per process (thread-safe) and return it.

    ``path`` (or ``$CUDNN_LIBRARY``) forces a file; otherwise the search order of
    the module docstring applies. Raises :class:`errors.LibraryNotFound` with an
    install hint when nothing loads.
    """
    return _LOADER.load(path)


def loaded() -> Library | None:
    """The library already loaded in this process, if any (never loads)."""
    return _LOADER.lib
