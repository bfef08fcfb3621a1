"""Named jobs: work a worker runs beside the cells, in the same process and CUDA context.

A job is a function marked with :func:`job` in the module that owns it; its name is
``module:function``. The worker imports that module by name when asked to run the job and
runs it only if the import registered it, so the worker imports no command and no
comparison, and nothing outside the registry can be run through it.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Callable

_JOBS: dict[str, Callable] = {}


class JobFailed(RuntimeError):
    """A job was asked of the worker wrongly, by a mistake of this tool: no such job, or
    parameters its function does not take (:func:`called`). What a job raises once running
    (a device or a library refusing) is the job's result, ``skipped`` with the reason."""


def job(fn: Callable) -> Callable:
    """Register ``fn`` as a job (a decorator); it is called with the job's parameters."""
    _JOBS[name_of(fn)] = fn
    return fn


def name_of(fn: Callable) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


def called(name: str, params: dict) -> Callable:
    """The job ``name`` bound to ``params``, ready to call; :class:`LookupError` if no such
    job exists, TypeError if its function does not take ``params``."""
    module, _, _ = name.partition(":")
    if name not in _JOBS and module.startswith("cudnn_rnn."):
        importlib.import_module(module)
    fn = _JOBS.get(name)
    if fn is None:
        raise LookupError(f"no job named {name!r}")
    inspect.signature(fn).bind(**params)
    return lambda: fn(**params)


def refusals(cupy=None) -> tuple:
    """What a job may raise that is a device's or a library's refusal (its result then says
    it was skipped, and why), not a mistake of this tool: cuDNN's, cuBLASLt's and the
    driver's errors and missing libraries, no GPU, and CUDA's errors (with ``cupy``). The
    8-bit engines' own refusals (a configuration they do not build, a stalled launch) are
    their jobs' records, caught there (:func:`cudnn_rnn.lowbit.candidates.failure`)."""
    from cudnn_rnn.bindings import errors as cudnn
    from cudnn_rnn.bindings.cublaslt import errors as lt
    from cudnn_rnn.bindings.driver import errors as driver
    from cudnn_rnn.engine import gpu
    return ((cudnn.CudnnError, cudnn.LibraryNotFound, lt.CublasLtError, lt.LibraryNotFound,
             driver.DriverError, driver.LibraryNotFound, gpu.NoGPU)
            + (gpu.cuda_errors(cupy) if cupy is not None else ()))


def run(name: str, params: dict):
    """Run the job ``name`` with ``params`` (:func:`called`)."""
    return called(name, params)()
