"""Named jobs: work a worker runs beside the cells, in the same process and CUDA context.

A job is a function marked with :func:`job` in the module that owns it; its name is
``module:function``. The worker imports that module by name when asked to run the job and
runs it only if the import registered it, so the worker imports no command and no
comparison, and nothing outside the registry can be run through it.
"""
from __future__ import annotations

import importlib
from typing import Callable

_JOBS: dict[str, Callable] = {}


# what a job raises only through a mistake of this tool (a wrong argument, a missing key or
# attribute, a failed assertion), never because the GPU or a library refused something: the
# worker sends it back as an error and the caller raises JobFailed, not a skipped result
BUGS = (TypeError, AttributeError, NameError, LookupError, AssertionError, ZeroDivisionError)


class JobFailed(RuntimeError):
    """A job in the worker failed by a mistake of this tool (:data:`BUGS`)."""


def job(fn: Callable) -> Callable:
    """Register ``fn`` as a job (a decorator); it is called with the job's parameters."""
    _JOBS[name_of(fn)] = fn
    return fn


def name_of(fn: Callable) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


def run(name: str, params: dict):
    """Run the job ``name`` with ``params``; :class:`LookupError` if no such job exists."""
    module, _, _ = name.partition(":")
    if name not in _JOBS and module.startswith("cudnn_rnn."):
        importlib.import_module(module)
    fn = _JOBS.get(name)
    if fn is None:
        raise LookupError(f"no job named {name!r}")
    return fn(**params)
