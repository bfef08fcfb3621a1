"""Exceptions generated from ``cudnnStatus_t``.

One class per status name, created at import from both status enums
(:class:`~.enums.StatusV9` and :class:`~.enums.StatusV8`). In cuDNN 9 a
sub-code class derives from its category class, so ``except NotSupported``
also catches ``NotSupportedDataType`` (3003). Every instance carries the C call
that failed, the numeric status, its name and cuDNN's logged reason, if any::

    try:
        lib.cudnnSetRNNDescriptor_v8(...)
    except errors.NotSupported as e:
        print(e.call, e.status_name, e.code, e.reason)
"""
from __future__ import annotations

from .enums import StatusV8, StatusV9, status_category
from .statuses import camel


class CudnnError(RuntimeError):
    """A cuDNN call returned a status other than CUDNN_STATUS_SUCCESS."""

    status_name: str = "UNKNOWN"

    def __init__(self, call: str, code: int, status_name: str | None = None,
                 reason: str | None = None, log: tuple[str, ...] = ()):
        self.call = call
        self.code = int(code)
        if status_name:
            self.status_name = status_name
        self.reason = reason
        self.log = tuple(log)
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.call} failed: CUDNN_STATUS_{self.status_name} ({self.code})"
        return f"{text}: {self.reason}" if self.reason else text

    def __reduce__(self):  # picklable across worker processes
        return (error_for, (self.call, self.code, self._version_hint(), self.reason, self.log))

    def _version_hint(self) -> int:
        return 90000 if self.code >= 1000 else 80000


class LibraryNotFound(OSError):
    """No loadable libcudnn was found (or the given path could not be loaded)."""


class MissingSymbol(AttributeError):
    """The loaded libcudnn does not export a function this project declares."""


ERROR_CLASSES: dict[str, type[CudnnError]] = {}


def _make(name: str, base: type[CudnnError]) -> type[CudnnError]:
    cls = ERROR_CLASSES.get(name)
    if cls is None:
        cls = type(camel(name), (base,), {"status_name": name,
                                          "__doc__": f"CUDNN_STATUS_{name}",
                                          "__module__": __name__})
        ERROR_CLASSES[name] = cls
        globals()[cls.__name__] = cls
    return cls


def _generate() -> None:
    # cuDNN 9 first: categories (x000) before their sub-codes, so bases exist.
    for member in sorted(StatusV9, key=lambda m: m.value):
        if member.value == 0:
            continue
        category = status_category(member.value)
        base = CudnnError
        if member.value != category and category in StatusV9._value2member_map_:
            base = ERROR_CLASSES[StatusV9(category).name]  # 1xxx have no category member
        _make(member.name, base)
    for name in StatusV9.__members__:  # deprecated aliases share their target's class
        alias = StatusV9[name]
        if name != alias.name:
            ERROR_CLASSES.setdefault(name, ERROR_CLASSES[alias.name])
    for member in StatusV8:
        if member.value:
            _make(member.name, CudnnError)


_generate()


def status_name(code: int, cudnn_version: int) -> str:
    """Name of a status code for the given library version; unknown codes keep their number."""
    enum_cls = StatusV9 if cudnn_version >= 90000 else StatusV8
    try:
        return enum_cls(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def error_for(call: str, code: int, cudnn_version: int, reason: str | None = None,
              log: tuple[str, ...] = ()) -> CudnnError:
    """Build the exception instance for ``code`` as returned by ``call``."""
    name = status_name(code, cudnn_version)
    cls = ERROR_CLASSES.get(name, CudnnError)
    return cls(call, code, name, reason, log)
