"""A loaded shared library whose functions are bound from a prototype table.

What the cuDNN and the cuBLASLt mirrors share: where the library came from (its path,
how it was found, why each candidate before it failed), its version numbers as the library
reports them, and its functions, bound lazily with ``argtypes``/``restype`` from the
prototypes (:meth:`BoundLibrary.raw`) and, for those returning a status, wrapped by the
subclass's checker (``lib.cudnnCreate(...)``, ``lt.cublasLtCreate(...)`` raise on failure).
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import ClassVar


class CheckedFunction:
    """A bound function whose nonzero status raises ``error_for(name, status, describe(status))``
    (the cuBLASLt and CUDA driver mirrors'; cuDNN's also captures its log)."""

    __slots__ = ("name", "raw", "_describe", "_error_for")

    def __init__(self, name: str, raw, describe, error_for):
        self.name, self.raw, self._describe, self._error_for = name, raw, describe, error_for

    def __call__(self, *args) -> None:
        status = self.raw(*args)
        if status:
            raise self._error_for(self.name, status, self._describe(status))


@dataclass
class BoundLibrary:
    path: str
    source: str  # how it was found ("explicit", "cuda-pathfinder (...)", "sys.path wheel", ...)
    cdll: ctypes.CDLL
    version_raw: int = 0
    cudart_raw: int = 0
    rejected: tuple = ()  # why each candidate tried before this one failed, in order
    _functions: dict = field(default_factory=dict, repr=False)

    PREFIX: ClassVar[str] = ""  # the C API's function prefix ("cudnn", "cublasLt")
    TITLE: ClassVar[str] = ""  # how messages name the library ("cuDNN", "cuBLASLt")
    PROTOTYPES: ClassVar[dict] = {}  # name -> Proto
    MISSING: ClassVar[type] = AttributeError  # raised for a declared function not exported

    @property
    def version(self) -> tuple[int, int, int]:  # pragma: no cover - each library decodes its own
        raise NotImplementedError

    @property
    def version_string(self) -> str:
        return "%d.%d.%d" % self.version

    @property
    def resolved_path(self) -> str:
        """The library file with symbolic links resolved (libX.so.9 → libX.so.9.x.y)."""
        return os.path.realpath(self.path) if os.path.exists(self.path) else self.path

    def has_symbol(self, name: str) -> bool:
        return hasattr(self.cdll, name)

    def raw(self, name: str):
        """The ctypes function with argtypes/restype set from its prototype."""
        fn = self._functions.get(("raw", name))
        if fn is None:
            proto = self.PROTOTYPES[name]
            try:
                fn = getattr(self.cdll, name)
            except AttributeError:
                raise self.MISSING(f"{name} is not exported by {self.path} "
                                   f"({self.TITLE} {self.version_string})") from None
            fn.argtypes, fn.restype = proto.argtypes, proto.restype
            self._functions[("raw", name)] = fn
        return fn

    def checked(self, name: str, raw):  # pragma: no cover - each library checks its statuses
        """``raw`` wrapped so that a status other than success raises."""
        raise NotImplementedError

    def __getattr__(self, name: str):
        if not name.startswith(self.PREFIX):
            raise AttributeError(name)
        fn = self._functions.get(name)
        if fn is None:
            proto = self.PROTOTYPES.get(name)
            if proto is None:
                raise AttributeError(f"{name} is not declared in the prototypes of "
                                     f"{type(self).__module__}")
            raw = self.raw(name)
            fn = self.checked(name, raw) if proto.returns_status else raw
            self._functions[name] = fn
        return fn
