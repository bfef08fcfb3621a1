"""Exceptions generated from a C API's status enum, one class per status: what the
cuBLASLt and CUDA driver mirrors share (cuDNN's, :mod:`.errors`, also nests sub-codes under
their categories and carries cuDNN's log).

Each instance carries the C call that failed, the numeric status, its name and the
library's own description of it; a status the enum does not know keeps its number.
"""
from __future__ import annotations


class StatusError(RuntimeError):
    """A call returned a status other than success. Subclassed per library (its
    ``C_PREFIX``, e.g. ``CUBLAS_STATUS_``) and per status (:func:`generate`)."""

    status_name: str = "UNKNOWN"
    C_PREFIX: str = ""

    def __init__(self, call: str, code: int, status_name: str | None = None,
                 reason: str | None = None):
        self.call, self.code, self.reason = call, int(code), reason
        if status_name:
            self.status_name = status_name
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.call} failed: {self.C_PREFIX}{self.status_name} ({self.code})"
        return f"{text}: {self.reason}" if self.reason else text

    def __reduce__(self):  # picklable across worker processes: the classes are module-level
        return (type(self), (self.call, self.code, self.status_name, self.reason))


def generate(base: type[StatusError], enum, module: dict, class_name) -> dict:
    """One subclass of ``base`` per nonzero member of ``enum``, named ``class_name(member
    name)``, entered in ``module`` (the defining module's globals); {member name: class}."""
    classes = {}
    for m in enum:
        if m.value:
            classes[m.name] = type(class_name(m.name), (base,), {
                "status_name": m.name, "__module__": module["__name__"],
                "__doc__": f"{base.C_PREFIX}{m.name}"})
    module.update({cls.__name__: cls for cls in classes.values()})
    return classes


def camel(name: str) -> str:
    """``NOT_SUPPORTED`` -> ``NotSupported``."""
    return "".join(part.capitalize() for part in name.split("_"))


def lookup(classes: dict, base: type[StatusError], enum, call: str, code: int,
           reason: str | None, unknown: str) -> StatusError:
    """The exception for ``code`` as returned by ``call``: its generated class, or ``base``
    named ``unknown`` + the number for a code ``enum`` does not have."""
    try:
        name = enum(code).name
    except ValueError:
        name = f"{unknown}{code}"
    return classes.get(name, base)(call, code, name, reason)
